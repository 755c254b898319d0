import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { METADATA_REVISION_DIGEST } from '../backup/revision-digest.js';
import { METADATA_DB_SIZE, METADATA_ETCD_VERSION, unusedName } from '../backup/take-full-snapshot.js';
import { IntegrityError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { boundedMemory } from '../common/memory-bound.js';
import { byteProgress } from '../common/progress.js';
import { type CompressionPolicy, compressionSuffix, compressor } from '../format/compression.js';
import { FullSnapshotCheck } from '../format/full-snapshot-check.js';
import { METADATA_SHA256, StoredDigest } from '../store/stored-digest.js';
import type { HeldSnapshot } from './held-snapshot.js';

/**
 * The compacted db (an etcd snapshot file: the db and its sha256 trailer) made the held full snapshot, as
 * `etcd-snapshot save` makes one from what etcd streams: trailer and revision checked on the way, compressed,
 * named as ebr names a full snapshot at `revision`, with the same metadata. `file` is consumed.
 */
export async function holdCompactedSnapshot(
  file: string,
  held: HeldSnapshot,
  options: {
    revision: number;
    /** The digest of its revision's events (revision-digest.ts), when the chain records one. */
    revisionDigest?: string;
    compression: CompressionPolicy;
    final: boolean;
    etcdVersion: string;
    logger?: Logger;
    signal?: AbortSignal;
  },
): Promise<{ name: string; dbBytes: number }> {
  const createdAt = Math.floor(Date.now() / 1000);
  const check = new FullSnapshotCheck('the compacted db', { spillDir: dirname(file) });
  const stored = new StoredDigest();
  const compressed = `${file}.${options.compression}`;
  try {
    await pipeline(
      createReadStream(file),
      boundedMemory(),
      byteProgress(options.logger ?? silentLogger, 'snapshot', (await stat(file)).size),
      check,
      compressor(options.compression, { parallel: true }),
      stored,
      createWriteStream(compressed),
      { signal: options.signal },
    );
    const facts = check.facts();
    if (facts.revision !== options.revision) {
      throw new IntegrityError(
        `the compacted db holds revision ${facts.revision}, not the chain's ${options.revision}; nothing was stored`,
      );
    }
    const name = await unusedName(held, {
      kind: 'Full',
      startRevision: 0,
      lastRevision: facts.revision,
      createdAt,
      compression: compressionSuffix(options.compression),
      final: options.final,
    });
    await held.putFile(name, compressed, {
      metadata: {
        [METADATA_SHA256]: stored.sha256(),
        [METADATA_ETCD_VERSION]: options.etcdVersion,
        [METADATA_DB_SIZE]: String(facts.size),
        ...(options.revisionDigest ? { [METADATA_REVISION_DIGEST]: options.revisionDigest } : {}),
      },
    });
    return { name, dbBytes: facts.size };
  } finally {
    await rm(file, { force: true });
    await rm(compressed, { force: true });
  }
}
