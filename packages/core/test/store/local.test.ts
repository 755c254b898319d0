import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@etcd-steward/core';
import { describeConformance } from './conformance.js';

describeConformance('local', async () => {
  const root = await mkdtemp(join(tmpdir(), 'store-local-'));
  return {
    open: (prefix) => openStore(`file://${join(root, prefix)}`),
    partSize: 256 * 1024,
    stop: () => rm(root, { recursive: true, force: true }),
  };
});
