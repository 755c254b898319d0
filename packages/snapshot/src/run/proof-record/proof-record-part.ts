import { parseDuration } from '@etcd-steward/core/common';
import type { SidecarPart } from '../sidecar-part.js';

export interface ProofRecordArgs {
  'proof-record-period': string;
}

/**
 * The restore drill's outcome as metrics: the record the drill writes to the store (`etcd-copy-backups verify
 * --against --record`, docs/proof.md §3), read every period.
 */
export const proofRecordPart: SidecarPart<ProofRecordArgs> = {
  name: 'proof-record',
  heading: 'Restore drill',
  options: (y) =>
    y.option('proof-record-period', {
      type: 'string',
      default: '1m',
      describe:
        "Read the restore drill's record (proofs/latest.json in the store, written by etcd-copy-backups verify --against --record; docs/proof.md) this often and publish it as etcd_snapshot_backup_proven_revision and friends; 0: never",
    }),

  configure(args) {
    const periodMs = parseDuration(args['proof-record-period'], 'proof-record-period');
    if (periodMs === 0) return undefined;
    return async (assembly, context) => {
      const { ProofRecordMetrics } = await import('./proof-record-metrics.js');
      const metrics = new ProofRecordMetrics({ store: assembly.store, periodMs }, context);
      assembly.proofRecord = () => metrics.latest;
      return [metrics];
    };
  },
};
