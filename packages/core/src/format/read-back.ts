/*
 * Which revisions of a delta the sidecar read back from etcd's history rather than received as etcd wrote them.
 * A delta event's time is when the sidecar received it. For a revision received live that is when etcd wrote it
 * (a watch's delay later); for one read back — the watch (re)started from an older revision after a restart, a
 * break or an outage, or fell behind — it is only an upper bound: etcd wrote it at some moment of the stretch
 * nobody watched. `--to-time` needs to know which is which (backup/time-cut.ts).
 *
 * Recorded as object metadata, never in the delta's bytes, so that ebr reads our deltas as before and we read
 * ebr's: `read-back` is `none`, or revision ranges such as `6558-6843,7001`. A delta without it (ebr's, or one
 * written before this was recorded) says nothing either way.
 */

/** Object metadata key of the revisions a delta holds that were read back, not received live. */
export const METADATA_READ_BACK = 'read-back';

/** Inclusive revision ranges, ascending, neither overlapping nor touching. */
export type RevisionRanges = Array<[number, number]>;

/** Every provider keeps a metadata value of up to 1024 characters (store/metadata.ts). */
const MAX_LENGTH = 1024;

/** Adds `first..last` (after every range already there) to `ranges`, joining it to the last range when they touch. */
export function addRange(ranges: RevisionRanges, first: number, last: number): void {
  const tail = ranges[ranges.length - 1];
  if (tail && first <= tail[1] + 1) tail[1] = Math.max(tail[1], last);
  else ranges.push([first, last]);
}

/**
 * The metadata value for `ranges`. Past what a value may hold, the ranges closest together are joined: that counts
 * the live revisions between them as read back, which makes a restore more cautious, never less.
 */
export function formatReadBack(ranges: RevisionRanges): string {
  const joined = ranges.map(([a, b]): [number, number] => [a, b]);
  for (;;) {
    const text = joined.length === 0 ? 'none' : joined.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(',');
    if (text.length <= MAX_LENGTH) return text;
    let closest = 1;
    for (let i = 2; i < joined.length; i++) {
      if (joined[i][0] - joined[i - 1][1] < joined[closest][0] - joined[closest - 1][1]) closest = i;
    }
    joined[closest - 1][1] = joined[closest][1];
    joined.splice(closest, 1);
  }
}

/** The ranges a metadata value names; undefined when there is none, or it is not one we write (then nothing is known). */
export function parseReadBack(value: string | undefined): RevisionRanges | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return [];
  const ranges: RevisionRanges = [];
  for (const part of value.split(',')) {
    const m = /^(\d{1,15})(?:-(\d{1,15}))?$/.exec(part);
    if (!m) return undefined;
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (first < 1 || last < first || (ranges.length > 0 && first <= ranges[ranges.length - 1][1])) return undefined;
    ranges.push([first, last]);
  }
  return ranges;
}

/** The range of `ranges` that holds `revision`, if any. */
export function rangeHolding(ranges: RevisionRanges, revision: number): [number, number] | undefined {
  return ranges.find(([a, b]) => a <= revision && revision <= b);
}
