import {
  DirectReplayEngine,
  type EtcdBinaries,
  GrpcReplayEngine,
  type Logger,
  type ReplayEngine,
  type TxnLimits,
} from '@etcd-steward/core/replay';

/**
 * How deltas are replayed. Both produce the same data — identical rows in etcd's `key` bucket — which the
 * fingerprint tests hold them to: `direct` writes the revisions into the snapshot's db file (fast, no etcd
 * until verification); `grpc` applies them as txns to a private etcd (one round trip per revision).
 */
export type ReplayMethod = 'direct' | 'grpc';

export const REPLAY_METHODS: readonly ReplayMethod[] = ['direct', 'grpc'];

export function createReplayEngine(
  method: ReplayMethod,
  options: { binaries: EtcdBinaries; workDir: string; limits?: TxnLimits; leaseTtl?: number; logger?: Logger },
): ReplayEngine {
  switch (method) {
    case 'direct':
      return new DirectReplayEngine({ leaseTtl: options.leaseTtl });
    case 'grpc':
      return new GrpcReplayEngine(options);
  }
}
