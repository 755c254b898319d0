import { type CatalogEntry, catalogStore } from '../backup/snapshot-catalog.js';
import { type ChainTarget, planChains, type SnapshotChain, type TimeDoubt } from '../backup/snapshot-chain.js';
import { TimeCut } from '../backup/time-cut.js';
import { OperationError, UsageError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import type { Logger } from '../common/logger.js';
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
 * it (TimeCut): each chain ends at the revision the restore will reach. The store is listed with the versions it
 * keeps (stored-versions.ts): a snapshot hidden by a delete marker is planned from its newest version.
 */
export async function planRestore(
  store: SnapStore,
  request: RestoreRequest,
  options: { signal?: AbortSignal; logger?: Logger } = {},
): Promise<RestorePlan> {
  const catalog = await catalogStore(store, { versions: true });
  if (catalog.versionsUnreadable) options.logger?.warn(`${store.location}: ${catalog.versionsUnreadable}`);
  const entries = catalog.snapshots;
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
    const cut = new TimeCut(store, nanos, entries, options);
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
    // read from a version other than the current one (stored-versions.ts)
    ...(e.versions?.id !== undefined ? { version: e.versions.id, why: e.versions.why } : {}),
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
      ...timeDoubtJson(c),
    })),
  };
}

/** A chain's TimeDoubt as JSON (times as RFC 3339 to the nanosecond): `uncertain`, or `timesUnrecorded`. */
export function timeDoubtJson(chain: { lastRevision: number; timeDoubt?: TimeDoubt }): Record<string, unknown> {
  const doubt = chain.timeDoubt;
  if (doubt?.readBack) {
    return {
      uncertain: {
        known: { revision: chain.lastRevision, at: formatRfc3339Nanos(doubt.readBack.knownAt) },
        readBack: {
          from: chain.lastRevision + 1,
          to: doubt.readBack.to,
          firstSeenAt: formatRfc3339Nanos(doubt.readBack.firstSeenAt),
        },
      },
    };
  }
  return doubt?.unrecorded ? { timesUnrecorded: doubt.unrecorded } : {};
}

/** A chain whose state at the plan's moment the store cannot tell (TimeDoubt.readBack) is refused: exit 1. */
export function refuseTimeDoubt(plan: RestorePlan, chain: SnapshotChain): void {
  if (!chain.timeDoubt?.readBack || plan.toTimeNanos === undefined) return;
  throw new OperationError(
    `--to-time ${describeTimeDoubt(chain, plan.toTimeNanos)}, and the store cannot tell which; nothing was restored. Pass --allow-partial to restore revision ${chain.lastRevision}, the newest known by then, or --to-revision to choose one of them`,
  );
}

/** What a chain's TimeDoubt means for the state at `nanos`, in words; undefined when there is none. */
export function describeTimeDoubt(chain: SnapshotChain, nanos: bigint): string | undefined {
  const doubt = chain.timeDoubt;
  const at = formatRfc3339Nanos(nanos);
  if (doubt?.readBack) {
    const { knownAt, to, firstSeenAt } = doubt.readBack;
    return `${at} falls in a stretch the sidecar did not watch live: revision ${chain.lastRevision} was known at ${formatRfc3339Nanos(knownAt)}, revision ${to} first seen at ${formatRfc3339Nanos(firstSeenAt)} (revisions ${chain.lastRevision + 1}..${to} read back from etcd's history), so the state then is one of revisions ${chain.lastRevision}..${to}`;
  }
  if (doubt?.unrecorded) {
    return `${doubt.unrecorded} does not record which of its events the sidecar received live (written by ebr or an older etcd-steward), so its times may be later than etcd wrote them: revision ${chain.lastRevision} is the newest recorded by ${at}, and etcd may have been further then`;
  }
  return undefined;
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
        `  ${e.kind.padEnd(4)}  ${`${e.startRevision}..${e.lastRevision}`.padEnd(23)}  ${formatBytes(e.size).padStart(10)}  ${e.name}${e.versions?.id !== undefined ? ` (version ${e.versions.id}: ${e.versions.why})` : ''}`,
      );
    }
    if (chain.gap) lines.push(`  missing: revisions ${chain.gap.from}..${chain.gap.to} are in no delta`);
    const doubt = plan.toTimeNanos !== undefined ? describeTimeDoubt(chain, plan.toTimeNanos) : undefined;
    if (doubt) lines.push(`  ${chain.timeDoubt?.readBack ? 'not watched live' : 'note'}: ${doubt}`);
  });
  return `${lines.join('\n')}\n`;
}
