#!/usr/bin/env node
// Starts again with the malloc setting it runs with before anything loads (src/process-settings.ts).
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';
import { COMPACT_SETTINGS } from '../dist/process-settings.js';

ensureProcessSettings(COMPACT_SETTINGS);
await import('../dist/cli.js');
