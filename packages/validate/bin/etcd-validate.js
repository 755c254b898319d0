#!/usr/bin/env node
// First, before anything loads: an older Node than the programs need stops here with what to do (node-check.ts).
import '@etcd-steward/core/node-check';
// Starts again without an etcd password on its command line before anything loads.
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';

ensureProcessSettings();
await import('../dist/cli.js');
