#!/usr/bin/env node
// First, before anything loads: an older Node than the programs need stops here with what to do (node-check.ts).
import '@etcd-steward/core/node-check';
// Starts again with the Node flags and malloc setting it runs with before anything loads (src/process-settings.ts).
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';
import { COPY_SETTINGS } from '../dist/process-settings.js';

ensureProcessSettings(COPY_SETTINGS);
await import('../dist/cli.js');
