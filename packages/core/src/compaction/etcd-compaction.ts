import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { snapshotToFile } from '../backup/snapshot-to-file.js';
import { OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import { createEtcdClient } from '../etcd/etcd-client.js';
import { reachMember } from '../etcd/etcd-status.js';
import { briefGoProgramEnv } from '../etcd/go-memory.js';
import { recordChildPid } from '../etcd/orphan-processes.js';
import type { MemberConfig } from '../etcd/snapshot-restore-command.js';
import { EtcdProcess } from '../etcd/spawned-etcd.js';

/** etcd reads its whole db at start-up, slowly under a tight memory limit (snapshot-inspection.ts). */
const START_TIMEOUT_MS = 10 * 60_000;
const STOP_GRACE_MS = 30_000;

export interface EtcdCompactionOptions {
  binaries: EtcdBinaries;
  /** The restored data dir, and the member its WAL names (the peer URL's port is taken again). */
  dataDir: string;
  member: MemberConfig;
  peerPort: number;
  /** Scratch: etcd's log and the pid file by which a later run stops an etcd this one left. */
  scratch: string;
  revision: number;
  defragment: boolean;
  defragTimeoutMs: number;
  snapshotTimeoutMs: number;
  /** Where the snapshot goes: the db as etcd sends it, with its sha256 trailer, uncompressed. */
  file: string;
  logger?: Logger;
  signal?: AbortSignal;
}

/**
 * The compaction as ebr does it, in a private etcd: started on the restored data dir, its history compacted
 * at the last revision (physically), defragmented when asked, its snapshot streamed into `file` (trailer
 * checked on the way) and etcd stopped. No longer the default (compacted-db.ts writes the same rows without
 * etcd); kept as the reference the tests hold that writer to.
 */
export async function compactInEtcd(options: EtcdCompactionOptions): Promise<{ etcdPeakRssBytes?: number }> {
  const logger = options.logger ?? silentLogger;
  const etcd = await EtcdProcess.start({
    binaries: options.binaries,
    name: options.member.name,
    dataDir: options.dataDir,
    logFile: join(options.scratch, 'etcd.log'),
    peerPort: options.peerPort,
    initialCluster: options.member.initialCluster,
    clusterToken: options.member.initialClusterToken,
    throwaway: true,
    env: briefGoProgramEnv(),
  });
  const connection = { endpoints: [etcd.clientUrl] };
  const client = createEtcdClient(connection);
  try {
    await recordChildPid(options.scratch, 'compact-etcd', etcd.pid);
    logger.info('starting etcd on the restored chain', { dataDir: options.dataDir });
    await etcd.waitHealthy(START_TIMEOUT_MS);
    options.signal?.throwIfAborted();
    logger.info('compacting the history', { revision: options.revision, engine: 'etcd' });
    await client.kv.compact({ revision: options.revision, physical: true });
    if (options.defragment) {
      logger.info('defragmenting', {});
      await withTimeout(client.maintenance.defragment({}), options.defragTimeoutMs, '--etcd-defrag-timeout');
    }
    options.signal?.throwIfAborted();
    const timeout = AbortSignal.timeout(options.snapshotTimeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const { endpoint, status, token } = await reachMember(connection);
    const request = {
      connection,
      endpoint,
      token,
      dbSize: status.dbSize,
      compression: 'none' as const,
      file: options.file,
    };
    await snapshotToFile(request, logger, signal).catch((err) => {
      if (!timeout.aborted || options.signal?.aborted) throw err;
      throw new OperationError(
        `the snapshot of the compacted etcd took longer than --etcd-snapshot-timeout (${options.snapshotTimeoutMs / 1000} s); nothing was stored: raise the timeout`,
      );
    });
    return { etcdPeakRssBytes: await peakRss(etcd.pid) };
  } finally {
    client.close();
    await etcd.stop(STOP_GRACE_MS);
  }
}

async function withTimeout<T>(work: Promise<T>, ms: number, flag: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new OperationError(`etcd did not finish within ${flag} (${ms / 1000} s); nothing was stored: raise it`)),
      ms,
    );
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** A child's peak resident memory (Linux `VmHWM`), read before it ends; undefined where /proc has none. */
async function peakRss(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
  return kb === undefined ? undefined : Number(kb) * 1024;
}
