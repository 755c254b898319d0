import { listSnapshots } from '@etcd-steward/core/backup';
import type { Logger } from '@etcd-steward/core/common';
import { renewedSnapshotLease, updateObject } from '@etcd-steward/core/kubernetes';
import { openStore } from '@etcd-steward/core/store';

/**
 * ebr's compact with `--enable-snapshot-lease-renewal`: once the compacted snapshot is stored, the full-snapshot
 * Lease (in POD_NAMESPACE) holds its last revision and its time, so that etcd-druid sees the compaction done and
 * stops starting compaction Jobs. As in ebr, a failure is logged and does not fail the Job: the snapshot is stored.
 */
export async function renewFullSnapshotLease(
  options: { store: string; leaseName: string; env: NodeJS.ProcessEnv },
  logger: Logger,
): Promise<void> {
  const namespace = options.env.POD_NAMESPACE;
  if (!namespace) {
    logger.warn(
      `full-snapshot Lease ${options.leaseName} not renewed: POD_NAMESPACE is not set (set it from the downward API)`,
    );
    return;
  }
  try {
    const store = await openStore(options.store);
    const newest = (await listSnapshots(store).finally(() => store.close?.()))
      .filter((s) => s.kind === 'Full')
      .sort((a, b) => a.lastRevision - b.lastRevision || a.createdAt - b.createdAt)
      .at(-1);
    if (!newest) {
      logger.warn(`full-snapshot Lease ${options.leaseName} not renewed: the store holds no full snapshot`);
      return;
    }
    const { KubeClient } = await import('@etcd-steward/snapshot/kube-client');
    const api = KubeClient.load(undefined).lease(options.leaseName, namespace);
    const snapshot = { lastRevision: newest.lastRevision, takenAt: new Date(newest.createdAt * 1000) };
    const written = await updateObject(api, (current) =>
      renewedSnapshotLease(current, { name: options.leaseName, namespace }, snapshot),
    );
    logger.info(
      written
        ? `renewed full-snapshot Lease ${options.leaseName} with revision ${newest.lastRevision}`
        : `full-snapshot Lease ${options.leaseName} already holds a newer revision`,
    );
  } catch (err) {
    logger.warn(`full-snapshot Lease ${options.leaseName} not renewed: ${(err as Error).message}`);
  }
}
