#!/usr/bin/env node
// First, before anything loads: an older Node than the programs need stops here with what to do (node-check.ts).
import '@etcd-steward/core/node-check';
// `run` and `save` start again with the Node flags and malloc setting they run with before anything loads
// (src/process-settings.ts), and every command without an etcd password on its command line.
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';
import { settingsFor } from '../dist/process-settings.js';

ensureProcessSettings(settingsFor(process.argv.slice(2)));
await import('../dist/cli.js');
