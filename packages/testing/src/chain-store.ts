import { type SnapStore, takeFullSnapshot } from '@etcd-steward/core';
import type { Etcd3 } from 'etcd3';
import { type StoredDelta, storeDeltas, watchEvents } from './delta-chain.js';
import { writeWorkload } from './workload.js';

/** What buildChainStore wrote. Times are synthetic: revision r happened at `timeOf(r)`. */
export interface ChainStore {
  /** The older and the newer full snapshot. */
  fulls: Array<{ name: string; revision: number }>;
  deltas: StoredDelta[];
  lastRevision: number;
  timeOf(revision: number): Date;
}

/**
 * A store the way the sidecar fills it, from a real etcd: a workload, a full snapshot, more writes, a second
 * full snapshot, more writes; and deltas for every revision after the first full, cut so that one ends
 * where the second full begins and the rest is split in two. Event and snapshot times are synthetic (one
 * second a revision from `t0`), so point-in-time tests can aim between any two revisions.
 */
export async function buildChainStore(
  client: Etcd3,
  endpoints: string[],
  store: SnapStore,
  options: { tempDir: string; keys?: number; t0?: number; compression?: 'gzip' | 'zstd' | 'none' },
): Promise<ChainStore> {
  const keys = options.keys ?? 1500;
  const t0 = options.t0 ?? Date.UTC(2026, 0, 1);
  const timeOf = (revision: number) => new Date(t0 + revision * 1000);
  const revisionNow = async () => Number((await client.kv.range({ key: Buffer.from([0]) })).header.revision);
  const full = async () => {
    const at = timeOf(await revisionNow());
    const saved = await takeFullSnapshot({
      connection: { endpoints },
      store,
      compression: options.compression ?? 'gzip',
      tempDir: options.tempDir,
      now: () => at,
    });
    return { name: saved.ref.name, revision: saved.revision };
  };
  await writeWorkload(client, { keys, seed: 1 });
  const first = await full();
  await writeWorkload(client, { keys: Math.ceil(keys / 3), seed: 2, prefix: '/b/' });
  const second = await full();
  await writeWorkload(client, { keys: Math.ceil(keys / 3), seed: 3, prefix: '/c/' });
  const lastRevision = await revisionNow();
  const events = await watchEvents(client, first.revision + 1, lastRevision, (r) => timeOf(r).toISOString());
  const deltas = await storeDeltas(store, events, {
    startRevision: first.revision + 1,
    cuts: [second.revision + 1, Math.floor((second.revision + lastRevision) / 2)],
    compression: options.compression,
    createdAt: (last) => Math.floor(timeOf(last).getTime() / 1000),
  });
  return { fulls: [first, second], deltas, lastRevision, timeOf };
}
