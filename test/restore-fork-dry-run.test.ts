// One etcd version: the plan's list of what --fork sets aside, read from the store alone.
import { readdir } from 'node:fs/promises';
import { LocalStore, listSnapshots } from '@etcd-steward/core';
import { buildChainStore, startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('restore-fork-dry-run-');

it('etcd-restore --fork --dry-run lists what --fork would set aside, and moves nothing', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const store = new LocalStore(at('store'));
  const chain = await buildChainStore(cluster.client(), cluster.endpoints, store, { tempDir: at(), keys: 300 });
  const before = (await listSnapshots(store)).map((e) => e.name);
  const revision = chain.fulls[0].revision + 5; // inside the first delta: everything after it goes aside
  const later = (await listSnapshots(store)).filter((e) => e.lastRevision > revision).map((e) => e.name);
  expect(later).toContain(chain.fulls[1].name);
  const args = ['--store', `file://${at('store')}`, '--data-dir', at('data'), '--to-revision', String(revision)];

  const json = await runProgram('etcd-restore', [...args, '--fork', '--dry-run', '--output', 'json']);
  expect(json.stderr).not.toMatch(/error/);
  expect(json.code).toBe(0);
  const { fork } = JSON.parse(json.stdout);
  expect(fork.folder).toBe(`forks/${revision}-<unix seconds>`);
  expect([...fork.snapshots].sort()).toEqual([...later].sort());

  const text = await runProgram('etcd-restore', [...args, '--fork', '--dry-run']);
  expect(text.code).toBe(0);
  expect(text.stdout).toContain(
    `fork: would set ${later.length} snapshot(s) past the restored revision aside under forks/${revision}-<unix seconds>/`,
  );
  for (const name of later) expect(text.stdout).toContain(`  ${name}\n`);
  // without --fork the plan says nothing of it
  expect((await runProgram('etcd-restore', [...args, '--dry-run'])).stdout).not.toMatch(/fork:/);

  expect((await listSnapshots(store)).map((e) => e.name)).toEqual(before);
  expect(await readdir(at('store'))).not.toContain('forks');
});
