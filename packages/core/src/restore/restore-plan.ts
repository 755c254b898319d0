import { type CatalogEntry, listSnapshots } from '../backup/snapshot-catalog.js';
import { type ChainTarget, planChains, type SnapshotChain } from '../backup/snapshot-chain.js';
import { TimeCut } from '../backup/time-cut.js';
import { OperationError, UsageError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import { formatRfc3339Nanos } from '../format/event-time.js';
import type { SnapStore } from '../store/snapstore.js';

/** What the user asked to restore. */
export interface RestoreRequest {
  /** Start from this full snapshot (object name, with or without `v2/`) instead of the newest usable one. */
  snapshot?: string;
  toRevision?: number;
  toTime?: Date;
  /** `toTime` exactly as given (RFC 3339 to the nanosecond, see event-time.ts): this is what is compared. */
  toTimeNanos?: bigint;
}

/** The chains to try, best first, and what the store holds overall. */
export interface RestorePlan {
  store: string;
  chains: SnapshotChain[];
  /** The newest revision any snapshot in the store names. */
  newestRevision: number;
  target: ChainTarget;
  /** The moment to restore, as compared (nanoseconds); each chain's last revision is the one it reaches then. */
  toTimeNanos?: bigint;
}

/**
 * Lists the store and plans the restore. Requests that cannot be met are usage errors, said before anything
 * is downloaded: a target past what the store holds (a revision past the newest, a time after the newest
 * snapshot was taken), or before the oldest full snapshot. A time target is then found in the deltas around
 * it (TimeCut): each chain ends at the revision the restore will reach.
 */
export async function planRestore(
  store: SnapStore,
  request: RestoreRequest,
  options: { signal?: AbortSignal } = {},
): Promise<RestorePlan> {
  const entries = await listSnapshots(store);
  const fulls = entries.filter((e) => e.kind === 'Full');
  if (fulls.length === 0) {
    throw new OperationError(
      `no full snapshot in ${store.location}: check --store, or take one with etcd-snapshot save`,
    );
  }
  const newestRevision = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  const target: ChainTarget = { revision: request.toRevision, time: request.toTime };
  if (request.toRevision !== undefined && request.toRevision > newestRevision) {
    throw new UsageError(
      `--to-revision ${request.toRevision} is past the newest revision in ${store.location} (${newestRevision}): restore without it for the newest state`,
    );
  }
  const nanos = timeNanos(request);
  const newest = entries.reduce((a, b) => (a.createdAt >= b.createdAt ? a : b));
  // The store knows the state up to when its newest snapshot was taken (its name gives the second), no later.
  if (nanos !== undefined && nanos >= BigInt(newest.createdAt + 1) * 1_000_000_000n) {
    throw new UsageError(
      `--to-time ${formatRfc3339Nanos(nanos)} is past the newest snapshot in ${store.location} (${newest.name}, taken ${formatRfc3339Nanos(BigInt(newest.createdAt) * 1_000_000_000n)}): the store cannot tell the state then; restore without it for the newest state`,
    );
  }
  let chains = planChains(entries, target);
  if (request.snapshot) {
    const wanted = request.snapshot.replace(/^v2\//, '');
    const named = fulls.find((e) => e.name === request.snapshot || e.name.endsWith(`/${wanted}`));
    if (!named) throw new UsageError(`--snapshot ${request.snapshot}: no such full snapshot in ${store.location}`);
    chains = chains.filter((c) => c.full.name === named.name);
    if (chains.length === 0) {
      throw new UsageError(`--snapshot ${request.snapshot} is newer than the requested point in time`);
    }
  }
  if (chains.length === 0) {
    const oldest = fulls.reduce((a, b) => (a.lastRevision <= b.lastRevision ? a : b));
    const what =
      request.toRevision !== undefined
        ? `--to-revision ${request.toRevision}`
        : `--to-time ${formatRfc3339Nanos(nanos ?? 0n)}`;
    throw new UsageError(
      `${what} is before the oldest full snapshot in ${store.location} (${oldest.name}, revision ${oldest.lastRevision}): nothing can restore it`,
    );
  }
  if (nanos !== undefined) {
    const cut = new TimeCut(store, nanos, options);
    chains = await Promise.all(chains.map((chain) => cut.apply(chain)));
  }
  return {
    store: store.location,
    chains,
    newestRevision,
    target,
    ...(nanos !== undefined ? { toTimeNanos: nanos } : {}),
  };
}

function timeNanos(request: RestoreRequest): bigint | undefined {
  if (request.toTimeNanos !== undefined) return request.toTimeNanos;
  return request.toTime ? BigInt(request.toTime.getTime()) * 1_000_000n : undefined;
}

/** The plan as `--dry-run` prints it: each object with its revisions and size, the first chain first. */
export function describePlan(plan: RestorePlan): object {
  const describe = (e: CatalogEntry) => ({
    name: e.name,
    kind: e.kind,
    revisions: `${e.startRevision}..${e.lastRevision}`,
    bytes: e.size,
  });
  return {
    store: plan.store,
    target: {
      revision: plan.target.revision ?? plan.chains[0].lastRevision,
      time: plan.toTimeNanos !== undefined ? formatRfc3339Nanos(plan.toTimeNanos) : undefined,
    },
    newestRevision: plan.newestRevision,
    chains: plan.chains.map((c, i) => ({
      use: i === 0 ? 'first' : 'if the newer full snapshots fail verification',
      reaches: c.lastRevision,
      bytes: [c.full, ...c.deltas].reduce((sum, e) => sum + e.size, 0),
      objects: [c.full, ...c.deltas].map(describe),
      ...(c.gap ? { missing: `revisions ${c.gap.from}..${c.gap.to} are in no delta` } : {}),
    })),
  };
}

export function formatPlan(plan: RestorePlan): string {
  const lines: string[] = [];
  const target = plan.target.revision
    ? `revision ${plan.target.revision}`
    : plan.toTimeNanos !== undefined
      ? `the state at ${formatRfc3339Nanos(plan.toTimeNanos)}`
      : `the newest revision (${plan.newestRevision})`;
  lines.push(`plan: restore ${target} from ${plan.store}`);
  plan.chains.forEach((chain, i) => {
    const bytes = [chain.full, ...chain.deltas].reduce((sum, e) => sum + e.size, 0);
    lines.push('');
    lines.push(
      `${i === 0 ? 'chain' : `fallback ${i}`}: reaches revision ${chain.lastRevision}, ${chain.deltas.length} delta(s), ${formatBytes(bytes)}`,
    );
    for (const e of [chain.full, ...chain.deltas]) {
      lines.push(
        `  ${e.kind.padEnd(4)}  ${`${e.startRevision}..${e.lastRevision}`.padEnd(23)}  ${formatBytes(e.size).padStart(10)}  ${e.name}`,
      );
    }
    if (chain.gap) lines.push(`  missing: revisions ${chain.gap.from}..${chain.gap.to} are in no delta`);
  });
  return `${lines.join('\n')}\n`;
}
