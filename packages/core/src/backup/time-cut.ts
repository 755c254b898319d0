import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OperationError } from '../common/errors.js';
import { parseRfc3339Nanos } from '../format/event-time.js';
import { METADATA_READ_BACK, parseReadBack, type RevisionRanges, rangeHolding } from '../format/read-back.js';
import type { SnapStore } from '../store/snapstore.js';
import { fetchDelta, readDeltaRevisions } from './fetch-delta.js';
import type { CatalogEntry } from './snapshot-catalog.js';
import type { SnapshotChain, TimeDoubt } from './snapshot-chain.js';

const SECOND = 1_000_000_000n;

/** A revision and when its first event was recorded (nanoseconds). */
interface Seen {
  revision: number;
  time: bigint;
}

/** What one delta says about a moment. */
interface DeltaCut {
  /** Its last revision recorded at or before the moment; the time is unknown when the delta was not read. */
  lastAtOrBefore?: { revision: number; time?: bigint };
  /** Its first revision recorded after the moment: the delta goes past it. */
  firstAfter?: Seen;
}

/**
 * Finds where a chain stops for a point in time: after the last revision whose first event was recorded at or
 * before `nanos` (revisions are never split), to the nanosecond. The restore then replays to exactly that
 * revision, so that the plan a dry run prints and the restore are one computation.
 *
 * An event's time is when the sidecar received it, so that revision was surely reached by the moment. It is the
 * state at the moment only if the next revision was written after it: true when the sidecar received the next one
 * live (its time is when etcd wrote it), unknown when the sidecar read it back after a stretch it did not watch
 * (format/read-back.ts). Then the chain says so (TimeDoubt), with the revisions the state may be.
 *
 * Only deltas that may hold a later event are read: one whose name says it was taken a whole second or more
 * before the moment holds none (its events were recorded before it was written). Each delta is read once
 * for all the chains of a plan.
 */
export class TimeCut {
  private readonly cuts = new Map<string, Promise<DeltaCut>>();
  private readonly readBacks = new Map<string, Promise<RevisionRanges | undefined>>();

  /** `entries`: the store's snapshots, for the deltas after a chain that stops at the moment. */
  constructor(
    private readonly store: SnapStore,
    private readonly nanos: bigint,
    private readonly entries: readonly CatalogEntry[],
    private readonly options: { signal?: AbortSignal } = {},
  ) {}

  /** The chain ending at the moment: its last revision, only the deltas it needs for it, and any doubt. */
  async apply(chain: SnapshotChain): Promise<SnapshotChain> {
    let reached = chain.full.lastRevision;
    let knownAt: bigint | undefined = BigInt(chain.full.createdAt) * SECOND;
    let knownIn: CatalogEntry | undefined;
    const deltas: CatalogEntry[] = [];
    let after: (Seen & { delta: CatalogEntry }) | undefined;
    for (const delta of chain.deltas) {
      const cut =
        BigInt(delta.createdAt + 1) * SECOND <= this.nanos
          ? { lastAtOrBefore: { revision: delta.lastRevision } }
          : await this.cut(delta);
      const last = cut.lastAtOrBefore;
      if (last && last.revision > reached) {
        reached = last.revision;
        knownAt = last.time;
        knownIn = delta;
        deltas.push(delta);
      }
      if (cut.firstAfter) {
        after = { ...cut.firstAfter, delta };
        break;
      }
    }
    const cut: SnapshotChain = { ...chain, deltas, lastRevision: reached, ...(after ? { gap: undefined } : {}) };
    // A chain cut short by time ends with a delta written after the moment; the revision after it is in the next one.
    after ??= await this.next(reached);
    if (!after) return cut;
    const doubt = await this.doubt(reached, after, async () => {
      if (knownAt !== undefined || !knownIn) return knownAt;
      // skipped as older than the moment: read now, all its events are before the moment, its last one's time too
      return (await this.cut(knownIn)).lastAtOrBefore?.time;
    });
    return doubt ? { ...cut, timeDoubt: doubt } : cut;
  }

  /**
   * Whether the revision after `reached` (recorded after the moment, `after`) may have been written before it:
   * it was read back (and with it every read-back revision that follows), or its delta does not say.
   */
  private async doubt(
    reached: number,
    after: Seen & { delta: CatalogEntry },
    knownAt: () => Promise<bigint | undefined>,
  ): Promise<TimeDoubt | undefined> {
    const next = reached + 1;
    // The first event after the moment may be one the full snapshot already holds (a delta goes on through it):
    // then the next revision is further on, perhaps in the delta after.
    const holder = next <= after.delta.lastRevision ? after.delta : this.continuing(reached);
    if (!holder) return undefined;
    const ranges = await this.readBackOf(holder);
    if (ranges === undefined) return { unrecorded: holder.name };
    const range = rangeHolding(ranges, next);
    if (!range) return undefined; // received live: etcd wrote it after the moment
    let to = range[1];
    for (let current = holder; to === current.lastRevision; ) {
      const following = this.continuing(to);
      const more = following && rangeHolding((await this.readBackOf(following)) ?? [], to + 1);
      if (!following || !more) break;
      to = more[1];
      current = following;
    }
    return { readBack: { knownAt: (await knownAt()) ?? after.time, to, firstSeenAt: after.time } };
  }

  /** The first revision after `reached` and its time, from the delta that continues there, if it was recorded later. */
  private async next(reached: number): Promise<(Seen & { delta: CatalogEntry }) | undefined> {
    const delta = this.continuing(reached);
    const after = delta && (await this.cut(delta)).firstAfter;
    return delta && after ? { ...after, delta } : undefined;
  }

  /** The delta holding `revision + 1` that reaches furthest, as a chain picks it. */
  private continuing(revision: number): CatalogEntry | undefined {
    let best: CatalogEntry | undefined;
    for (const e of this.entries) {
      if (e.kind !== 'Incr' || e.startRevision > revision + 1 || e.lastRevision <= revision) continue;
      if (!best || e.lastRevision > best.lastRevision) best = e;
    }
    return best;
  }

  /** What a delta's metadata says it read back; undefined when it says nothing (ebr's, older ones). */
  private readBackOf(delta: CatalogEntry): Promise<RevisionRanges | undefined> {
    let ranges = this.readBacks.get(delta.name);
    if (!ranges) {
      ranges = (async () => {
        // S3 listings carry no metadata: ask.
        const metadata =
          Object.keys(delta.metadata).length > 0 ? delta.metadata : (await this.store.stat(delta.name))?.metadata;
        return parseReadBack(metadata?.[METADATA_READ_BACK]);
      })();
      this.readBacks.set(delta.name, ranges);
    }
    return ranges;
  }

  private cut(delta: CatalogEntry): Promise<DeltaCut> {
    let cut = this.cuts.get(delta.name);
    if (!cut) {
      cut = this.read(delta);
      this.cuts.set(delta.name, cut);
    }
    return cut;
  }

  private async read(delta: CatalogEntry): Promise<DeltaCut> {
    const label = `${this.store.location}/${delta.name}`;
    const dir = await mkdtemp(join(tmpdir(), 'etcd-restore-time-'));
    try {
      const file = join(dir, 'delta.json');
      await fetchDelta(this.store, delta, file, { signal: this.options.signal });
      let lastAtOrBefore: Seen | undefined;
      for await (const revisions of readDeltaRevisions(file, delta, label)) {
        for (const rev of revisions) {
          const time = parseRfc3339Nanos(rev.events[0].time);
          if (time === undefined) {
            throw new OperationError(
              `${label}: revision ${rev.revision} has no recorded time ("${rev.events[0].time}"), so --to-time cannot place it`,
            );
          }
          if (time > this.nanos) return { lastAtOrBefore, firstAfter: { revision: rev.revision, time } };
          lastAtOrBefore = { revision: rev.revision, time };
        }
      }
      return { lastAtOrBefore };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
