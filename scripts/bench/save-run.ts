// One measured `etcdctl snapshot save` and one measured `etcd-snapshot save`. snapshot-save.ts and run.ts use them.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CompressionPolicy } from '@etcd-steward/core';
import { type Measurement, measure } from './measure.ts';

const root = new URL('../..', import.meta.url).pathname;

export type MeasuredSave = Measurement & { bytes: number };

/** etcdctl's snapshot of `endpoint` into `file` (kept). */
export async function measureEtcdctlSave(endpoint: string, file: string): Promise<MeasuredSave> {
  const m = await measure('etcdctl', ['--endpoints', endpoint, 'snapshot', 'save', file], {
    env: { ETCDCTL_API: '3' },
  });
  if (m.code !== 0) throw new Error(`etcdctl failed: ${m.stderr}`);
  return { ...m, bytes: (await stat(file)).size };
}

/** etcd-snapshot save of `endpoint` into the store folder `storeDir`; `bytes` is what it stored. */
export async function measureSave(
  endpoint: string,
  storeDir: string,
  compression: CompressionPolicy,
): Promise<MeasuredSave> {
  const m = await measure(process.execPath, [
    join(root, 'packages/snapshot/bin/etcd-snapshot.js'),
    ...['save', '--endpoints', endpoint, '--store', `file://${storeDir}`],
    ...['--compression', compression, '--output', 'json'],
  ]);
  if (m.code !== 0) throw new Error(`etcd-snapshot failed: ${m.stderr}`);
  return { ...m, bytes: JSON.parse(m.stdout).storedBytes as number };
}
