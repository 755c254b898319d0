import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { reachMember } from '../etcd/etcd-status.js';
import { type CompressionPolicy, compressionSuffix } from '../format/compression.js';
import { parseSnapshotName, type SnapshotRef, snapshotName } from '../format/snapshot-name.js';
import type { SnapStore } from '../store/snapstore.js';
import { storeFile } from '../store/store-file.js';
import { METADATA_SHA256 } from '../store/stored-digest.js';
import { etcdRevisionDigest, METADATA_REVISION_DIGEST } from './revision-digest.js';
import { snapshotToFile } from './snapshot-to-file.js';

export interface FullSnapshotOptions {
  /** Status and the snapshot itself streams over its own HTTP/2 connection (snapshot-stream.ts). */
  connection: EtcdConnection;
  /** Where the snapshot goes: a store, or anything that takes it the way a store does (the sidecar's spool). */
  store: Pick<SnapStore, 'location' | 'put' | 'putFile' | 'stat' | 'sealer'>;
  compression: CompressionPolicy;
  /** Where the compressed snapshot waits while its name (which holds its revision) is not yet known. */
  tempDir: string;
  final?: boolean;
  logger?: Logger;
  signal?: AbortSignal;
  now?: () => Date;
  /**
   * false: compress on this thread, for a long-running caller (the sidecar) whose memory counts for longer than
   * the snapshot's speed: zstd's two worker threads took ~3 MB more at the sidecar's peak, and their buffers,
   * freed into its one malloc arena, stayed resident after the snapshot (docs/performance.md). The stream from
   * etcd is read lean too (snapshot-stream.ts).
   */
  parallel?: boolean;
}

export interface SavedFullSnapshot {
  ref: SnapshotRef;
  revision: number;
  /** Size of the db as etcd sent it (with its sha256 trailer). */
  dbSize: number;
  /** Size of the stored object. */
  storedSize: number;
  etcdVersion: string;
  durationMs: number;
}

/** Object metadata we add; ebr ignores it. Lower-case keys so every provider keeps them. */
export const METADATA_ETCD_VERSION = 'etcd-version';
/** The db's size as etcd sent it (with its trailer): a restore decompresses no more than this. */
export const METADATA_DB_SIZE = 'db-size';

/**
 * etcd → verify (sha256 trailer) → compress → temp file (snapshot-to-file.ts) → store. The revision is read
 * from the content itself on the way, because the object name must carry it and a 3.4 stream does not say
 * it. Nothing reaches the store unless the trailer matched.
 */
export async function takeFullSnapshot(options: FullSnapshotOptions): Promise<SavedFullSnapshot> {
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const createdAt = Math.floor((options.now?.() ?? new Date()).getTime() / 1000);
  const { endpoint, status, token } = await reachMember(options.connection);
  const workDir = await mkdtemp(join(options.tempDir, 'etcd-snapshot-'));
  try {
    const temp = join(workDir, 'snapshot');
    const { connection, compression, signal } = options;
    const request = {
      connection,
      endpoint,
      token,
      dbSize: status.dbSize,
      compression,
      file: temp,
      parallel: options.parallel,
    };
    // Encrypted on the pass that writes the file when the store encrypts (reading it again would add a pass);
    // the key stays in this process, so an encrypting store takes the snapshot here.
    const sealer = options.store.sealer?.();
    // In the caller's own process, the sidecar's too: a child process of its own would add a second Node runtime
    // (~25 MB of anonymous memory) to what the pod's memory limit counts while it runs (docs/performance.md).
    const { facts, storedSha256, storedSize: written } = await snapshotToFile(request, logger, signal, sealer);
    const name = await unusedName(options.store, {
      kind: 'Full',
      startRevision: 0,
      lastRevision: facts.revision,
      createdAt,
      compression: compressionSuffix(options.compression),
      final: options.final ?? false,
    });
    // The name, which binds the object to it (docs/encryption.md §1), is known only now.
    const nameSeal = sealer?.nameSeal(name);
    if (nameSeal) await appendFile(temp, nameSeal);
    const storedSize = written + (nameSeal?.length ?? 0);
    // What etcd holds at the snapshot's revision, so that whether a later etcd continues this history can be told
    // without the snapshot (store-history.ts); a revision compacted meanwhile records nothing.
    const atRevision = await etcdRevisionDigest(connection, facts.revision, { timeoutMs: 5_000, signal });
    const put = {
      signal: options.signal,
      sealed: sealer !== undefined,
      metadata: {
        ...(storedSha256 ? { [METADATA_SHA256]: storedSha256 } : {}),
        [METADATA_ETCD_VERSION]: status.version,
        [METADATA_DB_SIZE]: String(facts.size),
        ...('digest' in atRevision ? { [METADATA_REVISION_DIGEST]: atRevision.digest } : {}),
      },
    };
    await storeFile(options.store, name, temp, put);
    const ref = parseSnapshotName(name)!;
    const result = {
      ref,
      revision: facts.revision,
      dbSize: facts.size,
      storedSize,
      etcdVersion: status.version,
      durationMs: Date.now() - started,
    };
    logger.info('full snapshot saved', {
      name,
      revision: facts.revision,
      dbBytes: facts.size,
      storedBytes: storedSize,
    });
    return result;
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

/** How many later seconds a name may move to when earlier ones are taken. */
const NAME_ATTEMPTS = 60;

/**
 * A save never replaces a snapshot: two saves of the same revision in one second would get one name. The
 * seconds in a name are when the snapshot was taken, and ebr reads a later one as well, so a taken name moves
 * to the next second that is free.
 */
export async function unusedName(
  store: Pick<SnapStore, 'location' | 'stat'>,
  ref: Omit<SnapshotRef, 'name'>,
): Promise<string> {
  for (let i = 0; i < NAME_ATTEMPTS; i++) {
    const name = snapshotName({ ...ref, createdAt: ref.createdAt + i });
    if (!(await store.stat(name))) return name;
  }
  throw new OperationError(
    `${store.location}: ${snapshotName(ref)} and the names of the next ${NAME_ATTEMPTS - 1} seconds are taken; nothing was stored. Try again in a minute`,
  );
}
