import {
  METADATA_DB_SIZE,
  METADATA_ETCD_VERSION,
  METADATA_REVISION_DIGEST,
  takeFullSnapshot,
} from '@etcd-steward/core/backup';
import { type Logger, OperationError } from '@etcd-steward/core/common';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import { type CompressionPolicy, parseSnapshotName, recordedSize } from '@etcd-steward/core/format';
import type { Spool, SpooledDelta } from './spool.js';

/** The spool has no room for the full snapshot: nothing was spooled, and etcd's history is all there is. */
export class SpoolTooSmallError extends OperationError {}

/**
 * Takes a full snapshot of etcd into the spool, for a term that starts while the store does not answer: the
 * chain's position in the store is unknown, so a new chain starts with this snapshot, and the deltas spooled
 * after it continue it until the store answers and takes them all, in order. The snapshot counts towards
 * `--spool-max-bytes` as the deltas do; one that would take the spool past it is not kept.
 */
export async function spoolFullSnapshot(options: {
  connection: EtcdConnection;
  spool: Spool;
  compression: CompressionPolicy;
  tempDir: string;
  logger: Logger;
  signal: AbortSignal;
}): Promise<SpooledDelta> {
  const { spool, logger } = options;
  const noRoom = (what: string) =>
    new SpoolTooSmallError(
      `${what} does not fit in the spool (${spool.bytes} bytes of --spool-max-bytes ${spool.maxBytes} in use): raise --spool-max-bytes for the sidecar to keep the changes while the store is down`,
    );
  if (!spool.hasRoom()) throw noRoom('a full snapshot');
  let spooled: SpooledDelta | undefined;
  await takeFullSnapshot({
    connection: options.connection,
    compression: options.compression,
    tempDir: options.tempDir,
    signal: options.signal,
    parallel: false, // as full-snapshots.ts
    // Its closing line would say the snapshot is in the store; only its progress is passed on.
    logger: {
      json: logger.json,
      progress: (msg, fields) => logger.progress(msg, fields),
      info() {},
      warn() {},
      error() {},
    },
    store: {
      location: `the spool ${spool.dir}`,
      // The spool takes a full snapshot only at the start of a term, before any other: no name is taken yet.
      stat: async () => undefined,
      put: async (name, body, put) => {
        const ref = parseSnapshotName(name)!;
        spooled = await spool.add(
          {
            name,
            startRevision: 0,
            lastRevision: ref.lastRevision,
            oldestEventAt: Date.now(),
            etcdVersion: put?.metadata?.[METADATA_ETCD_VERSION],
            decompressedBytes: recordedSize(put?.metadata?.[METADATA_DB_SIZE]) ?? null,
            revisionDigest: put?.metadata?.[METADATA_REVISION_DIGEST] ?? null,
            line: spool.newLine(),
          },
          body,
        );
      },
    },
  });
  const full = spooled!;
  if (spool.bytes > spool.maxBytes) {
    await spool.remove(full);
    throw noRoom(`a full snapshot of ${full.bytes} bytes`);
  }
  logger.info(
    'full snapshot spooled: it starts a new chain, uploaded with the deltas after it once the store answers',
    {
      name: full.name,
      revision: full.lastRevision,
      storedBytes: full.bytes,
    },
  );
  return full;
}
