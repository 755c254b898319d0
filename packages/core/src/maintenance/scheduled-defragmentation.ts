import type { EtcdConnection } from '../etcd/etcd-client.js';
import { createEtcdClient } from '../etcd/etcd-client.js';
import { type DefragmentationOptions, defragmentCluster, type MemberDefragmentation } from './defragmentation.js';
import { withEtcdLock } from './etcd-lock.js';

/** The etcd lock's job name that defragmentation runs (scheduled or after a NOSPACE alarm) hold. */
export const DEFRAGMENTATION_JOB = 'defragmentation';
/** When the last scheduled run was due (ISO time): a run for the same time is not done twice. */
export const DEFRAGMENTATION_LAST_RUN_KEY = 'etcd-steward/defragmentation/last-run';

export interface ScheduledDefragmentationOptions extends DefragmentationOptions {
  lockTtlSeconds: number;
  /** How long to wait for another holder of the lock before this run is given up. */
  lockWaitMs: number;
}

export type ScheduledDefragmentation = { ran: true; members: MemberDefragmentation[] } | { ran: false; reason: string };

/**
 * The run of a schedule due at `due`: under the etcd lock, once for the cluster. Two sidecars that both
 * believe they lead at that moment (a leader change) take turns on the lock, and the second finds the run
 * recorded and does nothing. A holder that loses its lease stops before its next member.
 */
export async function runScheduledDefragmentation(
  conn: EtcdConnection,
  due: Date,
  options: ScheduledDefragmentationOptions,
): Promise<ScheduledDefragmentation> {
  const lock = { ttlSeconds: options.lockTtlSeconds, waitMs: options.lockWaitMs, logger: options.logger };
  return withEtcdLock(conn, DEFRAGMENTATION_JOB, lock, async (lost) => {
    const client = createEtcdClient(conn);
    try {
      const last = await client.get(DEFRAGMENTATION_LAST_RUN_KEY).string();
      if (last !== null && Date.parse(last) >= due.getTime()) {
        return { ran: false, reason: `the run due at ${due.toISOString()} was done already (${last})` };
      }
      const signal = options.signal ? AbortSignal.any([options.signal, lost]) : lost;
      const members = await defragmentCluster(conn, { ...options, signal });
      await client.put(DEFRAGMENTATION_LAST_RUN_KEY).value(due.toISOString());
      return { ran: true, members };
    } finally {
      client.close();
    }
  });
}
