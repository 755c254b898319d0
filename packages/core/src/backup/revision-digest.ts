import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage } from '../common/errors.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { WatchCompactedError, watchRevisions } from '../etcd/etcd-watch.js';
import type { DeltaEvent } from '../format/delta-format.js';
import type { SnapStore } from '../store/snapstore.js';
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
 * it: etcd sends whole revisions, so its first response holds all of that revision's events.
 */
export async function etcdRevisionDigest(
  connection: EtcdConnection,
  revision: number,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<EtcdRevision> {
  // Revision 1 is etcd's empty start: no write made it.
  if (revision <= 1) return { digest: revisionDigest([]) };
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
  const file = join(scratchDir, `digest-${process.pid}-${Date.now()}.delta`);
  try {
    await fetchDelta(store, entry, file, options);
    const last: DeltaEvent[] = [];
    for await (const e of readDeltaEvents(file, entry, `${store.location}/${entry.name}`)) {
      if (e.modRevision === entry.lastRevision) last.push(e);
    }
    return revisionDigest(last);
  } finally {
    await rm(file, { force: true });
  }
}

/** Each revision's digest, from events in revision order (a revision's events side by side). */
async function* revisionDigests(
  events: AsyncIterable<DeltaEvent>,
): AsyncGenerator<{ revision: number; digest: string }> {
  let group: DeltaEvent[] = [];
  for await (const e of events) {
    if (group.length > 0 && e.modRevision !== group[0].modRevision) {
      yield { revision: group[0].modRevision, digest: revisionDigest(group) };
      group = [];
    }
    group.push(e);
  }
  if (group.length > 0) yield { revision: group[0].modRevision, digest: revisionDigest(group) };
}

/**
 * How far etcd agrees with a stored delta: its events compared revision by revision with what a watch from the
 * delta's start gives, up to `upTo`. The last revision both agree on (`startRevision - 1` when the first already
 * differs), or undefined when etcd compacted the delta's start.
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
  async function* etcdEvents(): AsyncGenerator<DeltaEvent> {
    for await (const batch of watchRevisions(connection, delta.startRevision, { signal })) {
      for (const e of batch.events) {
        if (e.modRevision > limit) return;
        yield e;
      }
      if (batch.revision >= limit) return;
    }
  }
  try {
    await fetchDelta(store, delta, file, options);
    const stored = revisionDigests(readDeltaEvents(file, delta, `${store.location}/${delta.name}`));
    const live = revisionDigests(etcdEvents());
    let agreed = delta.startRevision - 1;
    for await (const mine of stored) {
      if (mine.revision > limit) break;
      const theirs = await live.next();
      if (theirs.done || theirs.value.revision !== mine.revision || theirs.value.digest !== mine.digest) break;
      agreed = mine.revision;
    }
    return agreed;
  } catch (err) {
    if (err instanceof WatchCompactedError) return undefined;
    throw err;
  } finally {
    control.abort();
    await rm(file, { force: true });
  }
}
