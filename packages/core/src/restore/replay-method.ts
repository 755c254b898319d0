import type { Logger } from '../common/logger.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import { DirectReplayEngine } from '../replay/direct-replay-engine.js';
import type { ReplayEngine } from '../replay/replay-engine.js';
import { GrpcReplayEngine, type TxnLimits } from '../replay/replay-events.js';

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
