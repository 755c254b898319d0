import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { OperationError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import { planRestore } from '../restore/restore-plan.js';
import type { SnapStore } from '../store/snapstore.js';

/** What a compaction folds: the chain a restore of the newest state would use. */
export interface CompactionPlan {
  store: string;
  chain: SnapshotChain;
  /** Revisions the deltas add to the full snapshot: the chain's last revision minus the full's. */
  revisions: number;
  /** Stored bytes of the full snapshot and its deltas. */
  bytes: number;
  /** The new full snapshot is final when the chain ends with a final snapshot (taken at a shutdown). */
  final: boolean;
  /** Set when there is nothing to fold: why, in one line. */
  nothingToFold?: string;
}

/**
 * Plans a compaction with the restore's own planning, so that it folds exactly what a restore would replay.
 * A chain with a missing delta is refused: a full snapshot before the gap would only hide it.
 */
export async function planCompaction(
  store: SnapStore,
  options: { signal?: AbortSignal } = {},
): Promise<CompactionPlan> {
  const plan = await planRestore(store, {}, options);
  const chain = plan.chains[0];
  if (chain.gap) throw foldGapError(plan.store, chain, chain.gap);
  const objects: CatalogEntry[] = [chain.full, ...chain.deltas];
  return {
    store: plan.store,
    chain,
    revisions: chain.lastRevision - chain.full.lastRevision,
    bytes: objects.reduce((sum, e) => sum + e.size, 0),
    final: objects[objects.length - 1].final,
    ...(chain.deltas.length === 0
      ? {
          nothingToFold: `nothing to fold in ${plan.store}: the newest full snapshot ${chain.full.name} is at revision ${chain.lastRevision} and no delta follows it`,
        }
      : {}),
  };
}

/**
 * Why a chain that misses revisions is not folded, and what to do. `fallback`: the newer full snapshots failed
 * verification and the restore fell back to this chain.
 */
export function foldGapError(
  store: string,
  chain: SnapshotChain,
  gap: { from: number; to: number },
  fallback = false,
): OperationError {
  const why = fallback ? 'the newer full snapshots failed verification (logged above), and ' : '';
  return new OperationError(
    `${why}revisions ${gap.from}..${gap.to} are in no delta in ${store} (a delta after ${chain.full.name} is missing): a compaction would fold only up to revision ${chain.lastRevision}; nothing was stored. Take a full snapshot (etcd-snapshot save, or the sidecar's /snapshot/full) to start a complete chain`,
  );
}

/** The plan as `--dry-run --output json` prints it. */
export function describeCompactionPlan(plan: CompactionPlan): object {
  return {
    store: plan.store,
    ...(plan.nothingToFold ? { nothingToFold: true } : {}),
    revision: plan.chain.lastRevision,
    revisions: plan.revisions,
    bytes: plan.bytes,
    final: plan.final,
    objects: [plan.chain.full, ...plan.chain.deltas].map((e) => ({
      name: e.name,
      kind: e.kind,
      revisions: `${e.startRevision}..${e.lastRevision}`,
      bytes: e.size,
    })),
  };
}

/** The plan as `--dry-run` prints it: each object with its revisions and size. */
export function formatCompactionPlan(plan: CompactionPlan): string {
  if (plan.nothingToFold) return `${plan.nothingToFold}\n`;
  const { chain } = plan;
  const lines = [
    `plan: fold ${chain.deltas.length + 1} object(s) of ${plan.store}, ${formatBytes(plan.bytes)}, into one${plan.final ? ' final' : ''} full snapshot at revision ${chain.lastRevision} (${plan.revisions} revision(s) folded)`,
  ];
  for (const e of [chain.full, ...chain.deltas]) {
    lines.push(
      `  ${e.kind.padEnd(4)}  ${`${e.startRevision}..${e.lastRevision}`.padEnd(23)}  ${formatBytes(e.size).padStart(10)}  ${e.name}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
