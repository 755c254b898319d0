import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage, OperationError } from '../common/errors.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { etcdAuthToken } from '../etcd/etcd-grpc.js';
import { WatchCompactedError, watchRevisions } from '../etcd/etcd-watch.js';
import type { DeltaEvent } from '../format/delta-format.js';
import type { SnapStore } from '../store/snapstore.js';
import {
  type Compaction,
  compactionAt,
  currentKeyStates,
  etcdHoldsEvents,
  etcdStateAgrees,
  stateTells,
} from './compacted-revision.js';
import { fetchDelta, readDeltaEvents } from './fetch-delta.js';
import type { CatalogEntry } from './snapshot-catalog.js';

/**
 * Object metadata: the digest of the events of the snapshot's last revision (revisionDigest), as etcd gave them
 * when it was taken. What etcd still holds at that revision can be compared with it later, without the snapshot.
 */
export const METADATA_REVISION_DIGEST = 'revision-digest';

/**
 * A revision's identity: the sha256 of its events in order, every field but the time the sidecar saw them. Two
 * histories that give one revision the same digest made the same writes at it; after a fork they (all but
 * certainly) differ, if only in a key's version or create revision.
 */
export function revisionDigest(events: readonly DeltaEvent[]): string {
  const hash = createHash('sha256');
  for (const e of events) {
    const fixed = Buffer.alloc(1 + 8 * 3 + 4 + 4);
    fixed.writeUInt8(e.type === 'put' ? 0 : 1, 0);
    fixed.writeBigUInt64BE(BigInt(e.createRevision), 1);
    fixed.writeBigUInt64BE(BigInt(e.modRevision), 9);
    fixed.writeBigUInt64BE(BigInt(e.version), 17);
    fixed.writeUInt32BE(e.key.length, 25);
    fixed.writeUInt32BE(e.value.length, 29);
    hash.update(fixed).update(e.key).update(e.value).update(`${e.lease}\n`);
  }
  return hash.digest('hex');
}

/** What etcd holds at a revision: its digest, or why it cannot say. */
export type EtcdRevision = { digest: string } | { missing: 'compacted' | 'unreachable'; reason: string };

/**
 * The digest of etcd's events at `revision` (which must not be past etcd's current one), read by a watch from
 * it: etcd sends whole revisions, so its first response holds all of that revision's events. Where etcd compacted
 * at `revision` itself, the watch would show its puts without its deletes (compacted-revision.ts): 'compacted'.
 */
export async function etcdRevisionDigest(
  connection: EtcdConnection,
  revision: number,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<EtcdRevision> {
  // Revision 1 is etcd's empty start: no write made it.
  if (revision <= 1) return { digest: revisionDigest([]) };
  try {
    const token = await etcdAuthToken(connection);
    const before = await compactionAt(connection, token, revision);
    if (before !== 'below') return compactedAt(revision, before);
    const watched = await watchedRevisionDigest(connection, revision, options);
    // A compaction at `revision` while the watch read it would have dropped its deletes unseen.
    const after = 'digest' in watched ? await compactionAt(connection, token, revision) : 'below';
    return after === 'below' ? watched : compactedAt(revision, after);
  } catch (err) {
    return { missing: 'unreachable', reason: errorMessage(err) };
  }
}

function compactedAt(revision: number, compaction: Compaction): EtcdRevision {
  return {
    missing: 'compacted',
    reason:
      compaction === 'at'
        ? `etcd compacted at revision ${revision}, which drops that revision's deletes from its history`
        : `etcd has compacted revision ${revision}`,
  };
}

async function watchedRevisionDigest(
  connection: EtcdConnection,
  revision: number,
  options: { timeoutMs?: number; signal?: AbortSignal },
): Promise<EtcdRevision> {
  const control = new AbortController();
  const signal = AbortSignal.any([
    control.signal,
    AbortSignal.timeout(options.timeoutMs ?? 10_000),
    ...(options.signal ? [options.signal] : []),
  ]);
  try {
    for await (const batch of watchRevisions(connection, revision, { signal })) {
      const events = batch.events.filter((e) => e.modRevision === revision);
      if (batch.events.length > 0) return { digest: revisionDigest(events) };
    }
    return { missing: 'unreachable', reason: 'the watch ended' };
  } catch (err) {
    if (err instanceof WatchCompactedError) return { missing: 'compacted', reason: errorMessage(err) };
    return { missing: 'unreachable', reason: errorMessage(err) };
  } finally {
    control.abort();
  }
}

/**
 * The digest of a stored snapshot's last revision: a full snapshot's from its metadata (undefined when it has
 * none: ebr's, or one taken while etcd had compacted that revision already), a delta's from its events, read and
 * checked through a scratch file in `scratchDir`.
 */
export async function storedRevisionDigest(
  store: SnapStore,
  entry: CatalogEntry,
  scratchDir: string,
  options: { signal?: AbortSignal } = {},
): Promise<string | undefined> {
  if (entry.kind === 'Full') {
    return (
      entry.metadata[METADATA_REVISION_DIGEST] ?? (await store.stat(entry.name))?.metadata[METADATA_REVISION_DIGEST]
    );
  }
  return revisionDigest(await lastRevisionEvents(store, entry, scratchDir, options));
}

/**
 * How a stored snapshot's last revision (at or below etcd's current one, above 1) compares with etcd's: 'skip'
 * when the snapshot records nothing to compare (a full snapshot without a digest), 'compacted' when etcd no longer
 * holds what it would take. A delta's events at a revision etcd compacted at are compared with etcd's state there,
 * and at one it compacted past with its state now, as far as that tells (etcdStateAgrees); a full snapshot records
 * only a digest, which that state cannot give. An OperationError when etcd cannot be read.
 */
export async function compareStoredRevision(
  store: SnapStore,
  entry: CatalogEntry,
  connection: EtcdConnection,
  scratchDir: string,
  options: { signal?: AbortSignal } = {},
): Promise<'same' | 'different' | 'skip' | 'compacted'> {
  if (entry.kind === 'Incr') {
    const events = await lastRevisionEvents(store, entry, scratchDir, options);
    return compareEventsWithEtcd(connection, entry.lastRevision, events, options);
  }
  const stored = await storedRevisionDigest(store, entry, scratchDir, options);
  if (stored === undefined) return 'skip';
  const live = await etcdRevisionDigest(connection, entry.lastRevision, options);
  if ('digest' in live) return live.digest === stored ? 'same' : 'different';
  if (live.missing === 'unreachable') throw unreadable(entry.lastRevision, live.reason);
  return 'compacted';
}

/**
 * How `events` (all of one revision's, as a delta holds them) compare with what etcd holds at `revision`: by the
 * revision's digest where etcd still has its events, else by etcd's state at the revision it compacted at, or by its
 * state now once it compacted past (etcdStateAgrees). An OperationError when etcd cannot be read.
 */
export async function compareEventsWithEtcd(
  connection: EtcdConnection,
  revision: number,
  events: readonly DeltaEvent[],
  options: { signal?: AbortSignal } = {},
): Promise<'same' | 'different' | 'compacted'> {
  const live = await etcdRevisionDigest(connection, revision, options);
  if ('digest' in live) return live.digest === revisionDigest(events) ? 'same' : 'different';
  if (live.missing === 'unreachable') throw unreadable(revision, live.reason);
  try {
    const token = await etcdAuthToken(connection);
    if ((await compactionAt(connection, token, revision)) === 'past') {
      const state = await etcdStateAgrees(connection, token, events);
      return state === 'unknown' ? 'compacted' : state;
    }
    const held = await etcdHoldsEvents(connection, token, revision, events);
    return held === 'compacted' ? 'compacted' : held ? 'same' : 'different';
  } catch (err) {
    throw unreadable(revision, errorMessage(err));
  }
}

function unreadable(revision: number, reason: string): OperationError {
  return new OperationError(`cannot read revision ${revision} from etcd: ${reason}`);
}

/** A delta's events at its last revision, read and checked through a scratch file in `scratchDir`. */
async function lastRevisionEvents(
  store: SnapStore,
  entry: CatalogEntry,
  scratchDir: string,
  options: { signal?: AbortSignal },
): Promise<DeltaEvent[]> {
  const file = join(scratchDir, `digest-${process.pid}-${Date.now()}.delta`);
  try {
    await fetchDelta(store, entry, file, options);
    const last: DeltaEvent[] = [];
    for await (const e of readDeltaEvents(file, entry, `${store.location}/${entry.name}`)) {
      if (e.modRevision === entry.lastRevision) last.push(e);
    }
    return last;
  } finally {
    await rm(file, { force: true });
  }
}

/** A revision's events side by side, from events in revision order. */
async function* revisionGroups(events: AsyncIterable<DeltaEvent>): AsyncGenerator<DeltaEvent[]> {
  let group: DeltaEvent[] = [];
  for await (const e of events) {
    if (group.length > 0 && e.modRevision !== group[0].modRevision) {
      yield group;
      group = [];
    }
    group.push(e);
  }
  if (group.length > 0) yield group;
}

/**
 * How far etcd agrees with a stored delta: its events compared revision by revision with what a watch from the
 * delta's start gives, up to `upTo`. The last revision both agree on (`startRevision - 1` when the first already
 * differs), or undefined when etcd compacted the delta's start. Where etcd compacted at the start itself, the
 * watch would miss the start's deletes: that revision is compared with etcd's state there, the rest watched.
 */
export async function deltaAgreesThrough(
  store: SnapStore,
  delta: CatalogEntry,
  connection: EtcdConnection,
  upTo: number,
  scratchDir: string,
  options: { signal?: AbortSignal } = {},
): Promise<number | undefined> {
  const file = join(scratchDir, `agree-${process.pid}-${Date.now()}.delta`);
  const control = new AbortController();
  const signal = AbortSignal.any([
    control.signal,
    AbortSignal.timeout(60_000),
    ...(options.signal ? [options.signal] : []),
  ]);
  const limit = Math.min(upTo, delta.lastRevision);
  async function* etcdEvents(from: number): AsyncGenerator<DeltaEvent> {
    for await (const batch of watchRevisions(connection, from, { signal })) {
      for (const e of batch.events) {
        if (e.modRevision > limit) return;
        yield e;
      }
      if (batch.revision >= limit) return;
    }
  }
  const digestOf = (group: DeltaEvent[]) => ({ revision: group[0].modRevision, digest: revisionDigest(group) });
  let stored: AsyncGenerator<DeltaEvent[]> | undefined;
  let live: AsyncGenerator<DeltaEvent[]> | undefined;
  try {
    const token = await etcdAuthToken(connection);
    const compaction = await compactionAt(connection, token, delta.startRevision);
    if (compaction === 'past') return undefined;
    await fetchDelta(store, delta, file, options);
    stored = revisionGroups(readDeltaEvents(file, delta, `${store.location}/${delta.name}`));
    let agreed = delta.startRevision - 1;
    if (compaction === 'at') {
      const first = await stored.next();
      const held = first.done ? false : await etcdHoldsEvents(connection, token, delta.startRevision, first.value);
      if (held !== true) return held === 'compacted' ? undefined : agreed;
      agreed = delta.startRevision;
    }
    const watchFrom = agreed + 1;
    if (watchFrom > limit) return agreed;
    live = revisionGroups(etcdEvents(watchFrom));
    for await (const group of stored) {
      const mine = digestOf(group);
      if (mine.revision > limit) break;
      const theirs = await live.next();
      if (theirs.done) break;
      const other = digestOf(theirs.value);
      if (other.revision !== mine.revision || other.digest !== mine.digest) break;
      agreed = mine.revision;
    }
    // A compaction at a revision the watch was reading would have dropped that revision's deletes unseen.
    return (await compactionAt(connection, token, watchFrom)) === 'below' ? agreed : undefined;
  } catch (err) {
    if (err instanceof WatchCompactedError) return undefined;
    throw err;
  } finally {
    control.abort();
    // Left where a comparison stopped: the delta file and the watch are closed here.
    await live?.return(undefined);
    await stored?.return(undefined);
    await rm(file, { force: true });
  }
}

/** Keys of one delta whose state in etcd is read to tell its history (memory stays bounded by it). */
const MAX_STATE_KEYS = 10_000;

/** What etcd's state now tells of a delta's revisions: the first that differs, the last before it proven shared. */
export interface StateEvidence {
  differentAt?: number;
  sameThrough?: number;
}

/**
 * What etcd's present state tells of every revision in a delta whose revisions etcd compacted (stateTells), where
 * its last revision alone told nothing: each event compared with its key's state now, in revision order, up to the
 * first that differs. A delta's first MAX_STATE_KEYS distinct keys are read: evidence, not proof, past them.
 */
export async function deltaStateEvidence(
  store: SnapStore,
  delta: CatalogEntry,
  connection: EtcdConnection,
  scratchDir: string,
  options: { signal?: AbortSignal } = {},
): Promise<StateEvidence> {
  const file = join(scratchDir, `state-${process.pid}-${Date.now()}.delta`);
  const source = `${store.location}/${delta.name}`;
  try {
    await fetchDelta(store, delta, file, options);
    const keys = new Map<string, Buffer>();
    for await (const e of readDeltaEvents(file, delta, source)) {
      if (keys.size >= MAX_STATE_KEYS) break;
      keys.set(e.key.toString('latin1'), e.key);
    }
    const states = await etcdAuthToken(connection)
      .then((token) => currentKeyStates(connection, token, [...keys.values()]))
      .catch((err) => {
        throw unreadable(delta.lastRevision, errorMessage(err));
      });
    // The newest revision proven shared, and the one proven before it (a revision may be told both ways).
    let same: number | undefined;
    let sameBefore: number | undefined;
    for await (const e of readDeltaEvents(file, delta, source)) {
      const key = e.key.toString('latin1');
      if (!states.has(key)) continue;
      const told = stateTells(e, states.get(key));
      if (told === 'different')
        return { differentAt: e.modRevision, sameThrough: same === e.modRevision ? sameBefore : same };
      if (told === 'same' && same !== e.modRevision) [sameBefore, same] = [same, e.modRevision];
    }
    return { sameThrough: same };
  } finally {
    await rm(file, { force: true });
  }
}
