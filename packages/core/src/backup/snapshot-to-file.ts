import { createWriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../common/logger.js';
import { boundedMemory } from '../common/memory-bound.js';
import { byteProgress } from '../common/progress.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { openSnapshotStream } from '../etcd/snapshot-stream.js';
import { type CompressionPolicy, compressor } from '../format/compression.js';
import { FullSnapshotCheck, type FullSnapshotFacts } from '../format/full-snapshot-check.js';
import { StoredDigest } from '../store/stored-digest.js';

/** What snapshotToFile takes a full snapshot of, and where it writes it. */
export interface SnapshotToFileRequest {
  connection: EtcdConnection;
  /** The member reachMember found, its auth token, and the db size it reported (for progress). */
  endpoint: string;
  token?: string;
  dbSize: number;
  compression: CompressionPolicy;
  file: string;
  /**
   * Compress on threads of the compressor's own (compression.ts, `parallel`): the default. `false`: on this thread,
   * and the stream from etcd read lean (snapshot-stream.ts), for a caller whose memory counts for longer than speed.
   */
  parallel?: boolean;
}

export interface SnapshotFile {
  facts: FullSnapshotFacts;
  /**
   * sha256 and size of the compressed bytes in the file: what the store will hold. No sha256 when sealed: an
   * encrypted snapshot's tags authenticate every stored byte, and a digest too would cost the pass as much CPU
   * again as the encryption (docs/encryption.md §1).
   */
  storedSha256?: string;
  storedSize: number;
}

/**
 * etcd → verify (sha256 trailer, revision) → compress → (encrypt, with a sealer) → file. The db streams through in bounded memory; the
 * file is only complete, and the facts only returned, when the trailer matched.
 */
export async function snapshotToFile(
  request: SnapshotToFileRequest,
  logger: Logger,
  signal?: AbortSignal,
  sealer?: Transform,
): Promise<SnapshotFile> {
  const check = new FullSnapshotCheck('the snapshot etcd sent', { spillDir: dirname(request.file) });
  const stored = new StoredDigest(!sealer);
  await pipeline(
    openSnapshotStream(request.connection, {
      endpoint: request.endpoint,
      token: request.token,
      signal,
      lean: request.parallel === false,
    }),
    boundedMemory(),
    byteProgress(logger, 'snapshot', request.dbSize),
    check,
    compressor(request.compression, { parallel: request.parallel ?? true }),
    stored,
    ...(sealer ? [sealer] : []),
    createWriteStream(request.file),
    { signal },
  );
  return { facts: check.facts(), storedSha256: sealer ? undefined : stored.sha256(), storedSize: stored.size };
}
