import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Logger, silentLogger } from '../common/logger.js';
import { type RestoreResult, restore } from '../restore/restore.js';
import { type DbKey, dbKeys } from './db-keys.js';
import type { KeyFilter } from './key-filter.js';

export interface KeysAtOptions {
  /** The store's URL (`--store`). */
  store: string;
  encryptionKeyFile?: string;
  filter: KeyFilter;
  /** The revision to read (default: the newest); or `toTime`, a moment as `etcd-restore --to-time` takes it. */
  toRevision?: number;
  toTime?: Date;
  toTimeNanos?: bigint;
  /** As the restore's: stop at the last good revision before a damaged or missing delta, and say so. */
  allowPartial?: boolean;
  /** Where the scratch restore goes (about twice the db), removed at the end. */
  tmpDir: string;
  etcdBinDir?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

/** What was restored to read the keys: the revision, and how the store got there (a restore's summary). */
export type KeysAt = Omit<RestoreResult, 'dataDir' | 'fingerprint' | 'proof'>;

/** A member for the scratch restore: its data dir is read, never started. */
const SCRATCH_MEMBER = {
  name: 'get',
  initialCluster: 'get=http://127.0.0.1:2380',
  initialClusterToken: 'etcd-steward-get',
  initialAdvertisePeerUrls: 'http://127.0.0.1:2380',
};

/**
 * The keys `filter` asks about as etcd would serve them at a revision (or moment) the store holds, from the store
 * alone: the restore library rebuilds that revision into a scratch folder exactly as etcd-restore would (the same
 * chain, fallbacks and checks), the keys are read from the restored db file in key order (db-keys.ts: no etcd, memory
 * bounded), and the scratch folder goes on every exit path. `read` gets the restore's summary and the keys, and
 * must have consumed them when it returns.
 */
export async function keysAtRevision(
  options: KeysAtOptions,
  read: (at: KeysAt, keys: AsyncIterable<DbKey>) => Promise<void>,
): Promise<KeysAt> {
  const scratch = await mkdtemp(join(options.tmpDir, 'etcd-restore-get-'));
  try {
    const {
      dataDir: _dataDir,
      fingerprint: _fingerprint,
      proof: _proof,
      ...at
    } = await restore({
      store: options.store,
      encryptionKeyFile: options.encryptionKeyFile,
      dataDir: join(scratch, 'data'),
      member: SCRATCH_MEMBER,
      toRevision: options.toRevision,
      toTime: options.toTime,
      toTimeNanos: options.toTimeNanos,
      allowPartial: options.allowPartial,
      etcdBinDir: options.etcdBinDir,
      logger: options.logger ?? silentLogger,
      signal: options.signal,
    });
    await read(
      at,
      dbKeys(join(scratch, 'data', 'member', 'snap', 'db'), options.filter, {
        tmpDir: scratch,
        signal: options.signal,
      }),
    );
    return at;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
