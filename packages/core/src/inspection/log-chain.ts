import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { planChains, type SnapshotChain } from '../backup/snapshot-chain.js';
import { OperationError, UsageError } from '../common/errors.js';

/** The revisions a log covers: both ends included, each optional. */
export interface RevisionWindow {
  from?: number;
  to?: number;
}

/**
 * The chain a log reads: a full snapshot and the deltas after it, as a restore forms chains (snapshot-chain.ts),
 * chosen for the longest history rather than the quickest restore. Of the chains that reach the end of the window
 * without a gap, the one from the oldest full snapshot, so that the deltas cover as many revisions as the store
 * holds; but when `from` is past a full snapshot, the newest such one: the log needs nothing older, not even its
 * state. When every chain has a gap, the one reaching furthest (the log names the gap).
 */
export function logChain(entries: readonly CatalogEntry[], window: RevisionWindow, store: string): SnapshotChain {
  const fulls = entries.filter((e) => e.kind === 'Full');
  if (fulls.length === 0) {
    throw new OperationError(`no full snapshot in ${store}: check --store (etcd-snapshot list shows what it holds)`);
  }
  const newest = entries.reduce((max, e) => Math.max(max, e.lastRevision), 0);
  if (window.to !== undefined && window.to > newest) {
    throw new UsageError(`--to-revision ${window.to} is past the newest revision in ${store} (${newest})`);
  }
  if (window.from !== undefined && window.from > (window.to ?? newest)) {
    throw new UsageError(
      `--from-revision ${window.from} is past ${window.to === undefined ? `the newest revision in ${store} (${newest})` : `--to-revision ${window.to}`}`,
    );
  }
  const chains = planChains(entries, { revision: window.to });
  if (chains.length === 0) {
    const oldest = fulls.reduce((a, b) => (a.lastRevision <= b.lastRevision ? a : b));
    throw new UsageError(
      `--to-revision ${window.to} is before the oldest full snapshot in ${store} (${oldest.name}, revision ${oldest.lastRevision}): the store holds no history that old`,
    );
  }
  const whole = chains.filter((c) => !c.gap);
  if (whole.length === 0) {
    return chains.reduce((best, c) => (c.lastRevision > best.lastRevision ? c : best));
  }
  // chains come newest full first
  const from = window.from;
  const past = from === undefined ? undefined : whole.find((c) => c.full.lastRevision < from);
  return past ?? whole[whole.length - 1];
}
