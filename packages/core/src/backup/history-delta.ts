import type { EtcdConnection } from '../etcd/etcd-client.js';
import { etcdAuthToken } from '../etcd/etcd-grpc.js';
import { WatchCompactedError, watchRevisions } from '../etcd/etcd-watch.js';
import type { CompressionPolicy } from '../format/compression.js';
import type { DeltaEvent } from '../format/delta-format.js';
import type { SnapStore } from '../store/snapstore.js';
import { compactionAt } from './compacted-revision.js';
import { storeDelta } from './stored-delta.js';

/**
 * Stores etcd's history from revision `from` through `through` as one delta, every revision of it read back (no
 * sidecar watched it live): the revisions a chain lacks before a full snapshot that started a new one, where etcd
 * still holds them. Undefined, and nothing stored, when etcd compacted at `from` or past it (at `from` itself a
 * watch would miss that revision's deletes), before or while it is read.
 */
export async function storeHistoryDelta(
  connection: EtcdConnection,
  store: SnapStore,
  range: { from: number; through: number },
  options: { compression: CompressionPolicy; tempDir: string; signal?: AbortSignal },
): Promise<string | undefined> {
  const { from, through } = range;
  if ((await compactionAt(connection, await etcdAuthToken(connection), from)) !== 'below') return undefined;
  async function* history(): AsyncGenerator<DeltaEvent> {
    for await (const batch of watchRevisions(connection, from, { signal: options.signal })) {
      for (const e of batch.events) {
        if (e.modRevision > through) return;
        yield e;
      }
      if (batch.revision >= through) return;
    }
  }
  try {
    return await storeDelta(
      store,
      {
        startRevision: from,
        lastRevision: through,
        createdAt: Math.floor(Date.now() / 1000),
        compression: options.compression,
        readBack: [[from, through]],
      },
      history(),
      options,
    );
  } catch (err) {
    if (err instanceof WatchCompactedError) return undefined;
    throw err;
  }
}
