#!/usr/bin/env node
// Starts again without an etcd password on its command line before anything loads.
import { ensureProcessSettings } from '@etcd-steward/core/process-restart';

ensureProcessSettings();
await import('../dist/cli.js');
