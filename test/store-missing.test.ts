// One etcd version: how each program answers a missing store, before etcd matters.
import { readdir } from 'node:fs/promises';
import { startCluster } from '@etcd-steward/testing';
import { describe, expect, it } from 'vitest';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('store-missing-');

/** The error line a program prints when stderr is not a terminal. */
const errorOf = (stderr: string) => JSON.parse(stderr.trim().split('\n').at(-1) ?? '{}').msg as string;

describe('a file:// store whose folder does not exist (a typo, a volume not mounted)', () => {
  // Each reader on the same missing path: what it would have read as an empty store, and reported success on.
  const readers: [string, string, (store: string) => string[]][] = [
    [
      'etcd-copy-backups copy',
      'etcd-copy-backups',
      (store) => ['copy', '--from', store, '--to', `file://${at('copy-to')}`],
    ],
    ['etcd-copy-backups verify', 'etcd-copy-backups', (store) => ['verify', '--store', store]],
    ['etcd-copy-backups export', 'etcd-copy-backups', (store) => ['export', '--from', store, '--to', at('export.tar')]],
    ['etcd-snapshot list', 'etcd-snapshot', (store) => ['list', '--store', store]],
    ['etcd-restore', 'etcd-restore', (store) => ['--store', store, '--data-dir', at('restored')]],
    ['etcd-gc', 'etcd-gc', (store) => ['--store', store, '--keep-last', '1']],
    ['etcd-compact', 'etcd-compact', (store) => ['--store', store]],
  ];

  it.each(readers)(
    '%s refuses it: exit 2, the path named and what to check, nothing created',
    async (_, program, args) => {
      const missing = at('no-such-store');
      const result = await runProgram(program, args(`file://${missing}`));
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(errorOf(result.stderr)).toBe(
        `file://${missing}: the store's folder ${missing} does not exist (the nearest folder that does is ${at()}): check the path for a typo, and that the volume that holds the store is mounted`,
      );
      // Nothing touched: not the store's folder, nor a copy's destination, an export's tar or a restore's data dir.
      expect(await readdir(at())).toEqual([]);
    },
  );

  it('etcd-snapshot save, a writer, still creates it with its first snapshot', async () => {
    const cluster = await startCluster();
    try {
      const store = at('new-store', 'etcd');
      const saved = await runProgram('etcd-snapshot', [
        'save',
        '--endpoints',
        cluster.endpoints[0],
        '--store',
        `file://${store}`,
      ]);
      expect(saved.code).toBe(0);
      expect((await readdir(`${store}/v2`)).filter((n) => n.startsWith('Full-'))).toHaveLength(1);
      // …which a reader then finds.
      const listed = await runProgram('etcd-snapshot', ['list', '--store', `file://${store}`, '--output', 'json']);
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout)).toHaveLength(1);
    } finally {
      await cluster.stop();
    }
  });
});
