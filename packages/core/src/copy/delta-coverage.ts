import type { CatalogEntry } from '../backup/snapshot-catalog.js';

/** A full snapshot from which a restore cannot reach every later revision: the revisions no delta holds. */
export interface FallbackGap {
  full: string;
  revision: number;
  /** Revisions after the full snapshot, up to the store's newest, that no delta holds; oldest first. */
  inNoDelta: Array<{ from: number; to: number }>;
}

/**
 * For each full snapshot, the revisions after it up to `newestRevision` that no delta holds: where a restore that
 * falls back to it (the newer ones damaged) or `--to-revision` between it and a newer one would stop. Deltas go on
 * through every full snapshot the sidecar takes, so a store it wrote shows none, but where etcd compacted what a
 * delta needed or the chain started again after a lost spool. Only full snapshots with such revisions are listed.
 */
export function fallbackGaps(entries: readonly CatalogEntry[], newestRevision: number): FallbackGap[] {
  const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision);
  const out: FallbackGap[] = [];
  for (const full of entries.filter((e) => e.kind === 'Full')) {
    const inNoDelta: FallbackGap['inNoDelta'] = [];
    let covered = full.lastRevision;
    for (const d of deltas) {
      if (d.lastRevision <= covered) continue;
      if (d.startRevision > covered + 1) inNoDelta.push({ from: covered + 1, to: d.startRevision - 1 });
      covered = d.lastRevision;
    }
    if (covered < newestRevision) inNoDelta.push({ from: covered + 1, to: newestRevision });
    if (inNoDelta.length > 0) out.push({ full: full.name, revision: full.lastRevision, inNoDelta });
  }
  return out;
}
