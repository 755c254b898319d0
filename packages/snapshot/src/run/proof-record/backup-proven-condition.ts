import type { ProofRecord } from '@etcd-steward/core/backup';
import type { ConditionState } from '@etcd-steward/core/kubernetes';

/**
 * The EtcdMember's BackupProven condition from the restore drill's record (docs/proof.md §3): True when the last
 * drill proved the backups equal to the cluster, False when it found them different, of another cluster, not
 * restorable, or failed, Unknown when it could not prove them yet (the cluster compacted past the chain, say).
 */
export function backupProvenCondition(record: ProofRecord): ConditionState {
  const at = `at ${record.checkedAt}`;
  const why = record.reason ? `: ${record.reason}` : '';
  switch (record.outcome) {
    case 'proven':
      return {
        type: 'BackupProven',
        status: 'True',
        reason: 'Proven',
        message: `the restore drill proved revision ${record.revision ?? record.provenRevision} equal to the cluster ${at}`,
      };
    case 'unprovable':
      return {
        type: 'BackupProven',
        status: 'Unknown',
        reason: 'Unprovable',
        message: `the restore drill could not prove the backups ${at}${why}`,
      };
    case 'mismatch':
      return {
        type: 'BackupProven',
        status: 'False',
        reason: 'Mismatch',
        message: `the restored backups differ from the cluster ${at}${why}`,
      };
    case 'foreign':
      return {
        type: 'BackupProven',
        status: 'False',
        reason: 'ForeignHistory',
        message: `the store holds another cluster's history ${at}${why}`,
      };
    case 'not-restorable':
      return {
        type: 'BackupProven',
        status: 'False',
        reason: 'NotRestorable',
        message: `the store's newest chain does not restore ${at}${why}`,
      };
    default:
      return {
        type: 'BackupProven',
        status: 'False',
        reason: 'DrillFailed',
        message: `the restore drill failed ${at}${why}`,
      };
  }
}
