import { formatBytes } from '../common/format-bytes.js';
import type { Logger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { compactHistory, type EtcdAlarm, setAlarm } from '../etcd/etcd-maintenance.js';
import { memberList } from '../etcd/etcd-members.js';
import { memberStatus } from '../etcd/etcd-status.js';
import { defragmentCluster } from './defragmentation.js';

export interface NoSpaceRecoveryOptions {
  /** etcd's --quota-backend-bytes. */
  quotaBytes: number;
  /** Disarm once every member's db is under this share of the quota (0-1): below it, writes have room again. */
  threshold: number;
  /** The longest one member's defragmentation may take. */
  defragTimeoutMs: number;
  logger: Logger;
  signal?: AbortSignal;
  /**
   * The oldest revision a reader of etcd's history still needs (the snapshotter's watch): the compaction keeps
   * it, so that the deltas go on without a gap. Space the reader holds back is freed by a later recovery.
   */
  oldestNeededRevision?: () => number | undefined;
}

export interface NoSpaceRecovery {
  disarmed: boolean;
  /** The largest member db after compaction and defragmentation. */
  dbBytes: number;
  compactedAt: number;
}

/**
 * What an operator does on a NOSPACE alarm (etcd's "space quota" runbook), step by step and each step logged:
 * compact the history up to the current revision (or the oldest one still needed), defragment every member (the leader last), and disarm the
 * alarms only when every db is back under the threshold; otherwise the live data itself fills the quota and
 * disarming would only let etcd raise the alarm again, so it stays raised and says what to do.
 */
export async function recoverFromNoSpace(
  conn: EtcdConnection,
  alarms: readonly EtcdAlarm[],
  options: NoSpaceRecoveryOptions,
): Promise<NoSpaceRecovery> {
  const { logger } = options;
  const current = (await memberStatus(conn)).revision;
  const revision = Math.min(current, options.oldestNeededRevision?.() ?? current);
  logger.info('NOSPACE: compacting the history', { revision, currentRevision: current });
  await compactHistory(conn, revision, { timeoutMs: options.defragTimeoutMs });
  options.signal?.throwIfAborted();
  logger.info('NOSPACE: defragmenting every member');
  await defragmentCluster(conn, {
    minReclaimBytes: 0,
    timeoutMs: options.defragTimeoutMs,
    logger,
    signal: options.signal,
  });
  const members = await memberList(conn);
  const sizes = await Promise.all(
    members.map(async (m) => (await memberStatus(conn, { endpoint: m.clientUrls[0] })).dbSize),
  );
  const dbBytes = Math.max(...sizes);
  const limit = options.quotaBytes * options.threshold;
  if (dbBytes >= limit) {
    logger.error('NOSPACE: the data itself fills the quota; the alarm stays raised', {
      dbBytes,
      limitBytes: limit,
      fix: `delete data, or raise etcd's --quota-backend-bytes (and --alarm-quota-bytes) above ${formatBytes(dbBytes / options.threshold)}`,
    });
    return { disarmed: false, dbBytes, compactedAt: revision };
  }
  for (const alarm of alarms) {
    options.signal?.throwIfAborted();
    await setAlarm(conn, alarm, false);
    logger.info('NOSPACE: alarm disarmed', { member: alarm.memberId, dbBytes, limitBytes: limit });
  }
  return { disarmed: true, dbBytes, compactedAt: revision };
}
