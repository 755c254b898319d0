#!/usr/bin/env node
// Starts again with the Node flags and malloc setting it runs with before anything loads (src/process-settings.ts).
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';
import { RESTORE_SETTINGS } from '../dist/process-settings.js';

ensureProcessSettings(RESTORE_SETTINGS);
await import('../dist/cli.js');
