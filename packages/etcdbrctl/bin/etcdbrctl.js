#!/usr/bin/env node
// First, before anything loads: an older Node than the programs need stops here with what to do (node-check.ts).
import '@etcd-steward/core/node-check';

// Loaded only after the check: a static import would be linked, and its graph read, before the check runs.
await import('../dist/cli.js');
