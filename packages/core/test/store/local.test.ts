import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { describeConformance } from './conformance.js';

describeConformance('local', async () => {
  const root = await mkdtemp(join(tmpdir(), 'store-local-'));
  return {
    open: (prefix) => openStore(`file://${join(root, prefix)}`),
    partSize: 256 * 1024,
    stop: () => rm(root, { recursive: true, force: true }),
  };
});

describe('local store temp files', () => {
  it('clears what a killed writer left an hour ago, and keeps what a live one is writing', async () => {
    const root = await mkdtemp(join(tmpdir(), 'store-local-temps-'));
    try {
      await mkdir(join(root, '.tmp'));
      const stale = join(root, '.tmp', 'killed.part');
      const live = join(root, '.tmp', 'writing.part');
      await writeFile(stale, 'half a snapshot');
      await writeFile(live, 'being written');
      const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
      await utimes(stale, twoHoursAgo, twoHoursAgo);
      await openStore(`file://${root}`);
      expect(await readdir(join(root, '.tmp'))).toEqual(['writing.part']);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
