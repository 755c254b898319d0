import { closeSync, openSync } from 'node:fs';
import { revisionDigest } from '../backup/revision-digest.js';
import { BboltReader, leafElements } from '../bbolt/bbolt-file.js';
import { isTombstoneKey, mainRevision } from '../bbolt/revision-key.js';
import { errorMessage } from '../common/errors.js';
import { createEtcdClient, type EtcdConnection } from '../etcd/etcd-client.js';
import { watchRevisions } from '../etcd/etcd-watch.js';
import type { DeltaEvent } from '../format/delta-format.js';
import { userKey } from '../validation/db-keyspace.js';
import { rowEvent } from '../validation/db-revision-digest.js';
import { keyValue } from '../validation/live-row-digests.js';
import { NewestRows } from '../validation/newest-rows.js';
import type { ProofDifference } from './proof-verdict.js';

/** Keys read from etcd at a time (gRPC's message limit: docs/developer.md). */
const PAGE = 1000;
/** How long the search for the first difference may take: it is a diagnosis, after the verdict. */
const SEARCH_MS = 120_000;
const MEMORY_BUDGET = 32 << 20;

/** A key's state at a revision, as both sides describe it: a put event's fields but its kind and time. */
type KeyState = Pick<DeltaEvent, 'key' | 'value' | 'createRevision' | 'modRevision' | 'version' | 'lease'>;

export interface DifferenceSearch {
  dbFile: string;
  /** One member, the one whose hash differed. */
  connection: EtcdConnection;
  revision: number;
  compactRevision: number;
  tmpDir: string;
  signal?: AbortSignal;
}

/**
 * Where a backup and the cluster differ: the first key, in key order, whose state at `revision` differs (range
 * reads of the member at that revision against the db's newest rows), and the first revision in
 * (compactRevision, revision] whose writes differ (the member's watch from there against the db's rows), with a
 * count of the revisions that are the same in both, which tells another cluster's history from one with a fault.
 */
export async function findDifference(search: DifferenceSearch): Promise<ProofDifference> {
  const signal = AbortSignal.any([AbortSignal.timeout(SEARCH_MS), ...(search.signal ? [search.signal] : [])]);
  const key = await firstDifferingKey(search).catch((err) => {
    if (search.signal?.aborted) throw err;
    return { key: '(unknown)', cluster: `cannot be read: ${errorMessage(err)}`, backup: '' };
  });
  const history = await firstDifferingRevision(search, signal).catch((err) => {
    if (search.signal?.aborted) throw err;
    return { revisionsCompared: 0, revisionsSame: 0, error: errorMessage(err) };
  });
  return {
    ...(key ? { key } : {}),
    ...('revision' in history && history.revision ? { revision: history.revision } : {}),
    revisionsCompared: history.revisionsCompared,
    revisionsSame: history.revisionsSame,
  };
}

/** The first key whose state at the revision differs, merging both keyspaces in key order. */
async function firstDifferingKey(search: DifferenceSearch): Promise<ProofDifference['key']> {
  const client = createEtcdClient(search.connection);
  try {
    const live = liveKeys(client, search.revision);
    const backup = dbKeys(search.dbFile, search.revision, search.tmpDir);
    let a = await live.next();
    let b = backup.next();
    while (!a.done || !b.done) {
      search.signal?.throwIfAborted();
      const order = a.done ? 1 : b.done ? -1 : Buffer.compare(a.value.key, b.value.key);
      if (order < 0) return { key: show(a.value?.key), cluster: describe(a.value), backup: 'absent' };
      if (order > 0) return { key: show(b.value?.key), cluster: 'absent', backup: describe(b.value) };
      const mine = describe(b.value);
      const theirs = describe(a.value);
      if (mine !== theirs) return { key: show(a.value?.key), cluster: theirs, backup: mine };
      a = await live.next();
      b = backup.next();
    }
    return undefined;
  } finally {
    client.close();
  }
}

async function* liveKeys(client: ReturnType<typeof createEtcdClient>, revision: number): AsyncGenerator<KeyState> {
  let from: Buffer = Buffer.from([0]);
  for (;;) {
    const res = await client.kv.range({ key: from, range_end: Buffer.from([0]), revision, limit: PAGE });
    for (const kv of res.kvs) {
      yield {
        key: kv.key,
        value: kv.value,
        createRevision: Number(kv.create_revision),
        modRevision: Number(kv.mod_revision),
        version: Number(kv.version),
        lease: String(kv.lease),
      };
    }
    if (!res.more || res.kvs.length === 0) return;
    from = Buffer.concat([res.kvs[res.kvs.length - 1].key, Buffer.from([0])]);
  }
}

/** The db's live keys at `revision`, in key order: each key's newest row, read again from its page. */
function* dbKeys(dbFile: string, revision: number, tmpDir: string): Generator<KeyState> {
  const fd = openSync(dbFile, 'r');
  const index = new NewestRows({ tmpDir, memoryBudget: MEMORY_BUDGET });
  try {
    const reader = new BboltReader(fd);
    const bucket = reader.buckets().get('key');
    if (!bucket) return;
    walk: for (const leaf of reader.leaves(bucket)) {
      const elements = leafElements(leaf.page);
      for (let element = 0; element < elements.length; element++) {
        const row = elements[element];
        if (mainRevision(row.key) > revision) break walk;
        if (row.value.length === 0) continue;
        index.add(userKey(row.value, leaf.id, element), { page: leaf.id, element }, isTombstoneKey(row.key), false);
      }
    }
    let cached: { id: number | undefined; elements: ReturnType<typeof leafElements> } | undefined;
    for (const row of index.inKeyOrder()) {
      if (row.tombstone) continue;
      if (cached?.id !== row.page || !cached) {
        cached = {
          id: row.page,
          elements: leafElements(row.page === undefined ? (bucket.inline ?? Buffer.alloc(0)) : reader.page(row.page)),
        };
      }
      const value = cached.elements[row.element].value;
      const kv = keyValue(value, row.page, row.element);
      yield {
        key: kv.key,
        value: kv.value,
        createRevision: Number(kv.createRevision),
        modRevision: Number(kv.modRevision),
        version: Number(kv.version),
        lease: rowEvent(cached.elements[row.element].key, value, Number(kv.modRevision)).lease,
      };
    }
  } finally {
    index.close();
    closeSync(fd);
  }
}

/** The first revision whose writes differ, comparing each revision's digest (revisionDigest) in order. */
async function firstDifferingRevision(
  search: DifferenceSearch,
  signal: AbortSignal,
): Promise<{ revision?: ProofDifference['revision']; revisionsCompared: number; revisionsSame: number }> {
  const { revision: last, compactRevision } = search;
  let compared = 0;
  let same = 0;
  let first: ProofDifference['revision'];
  if (last <= compactRevision) return { revisionsCompared: 0, revisionsSame: 0 };
  const live = groupByRevision(liveEvents(search.connection, compactRevision + 1, last, signal));
  const backup = groupByRevision(dbEvents(search.dbFile, compactRevision, last));
  let a = await live.next();
  let b = await backup.next();
  while (!a.done || !b.done) {
    const ra = a.done ? Number.POSITIVE_INFINITY : a.value.revision;
    const rb = b.done ? Number.POSITIVE_INFINITY : b.value.revision;
    const at = Math.min(ra, rb);
    compared++;
    const theirs = ra === at && !a.done ? a.value.events : [];
    const mine = rb === at && !b.done ? b.value.events : [];
    if (revisionDigest(theirs) === revisionDigest(mine)) same++;
    else first ??= { revision: at, cluster: writes(theirs), backup: writes(mine) };
    // Once both a difference and an agreement are known, the verdict no longer depends on the rest.
    if (first && same > 0) break;
    if (ra === at) a = await live.next();
    if (rb === at) b = await backup.next();
  }
  return { ...(first ? { revision: first } : {}), revisionsCompared: compared, revisionsSame: same };
}

async function* liveEvents(
  connection: EtcdConnection,
  from: number,
  to: number,
  signal: AbortSignal,
): AsyncGenerator<DeltaEvent> {
  const control = new AbortController();
  try {
    for await (const batch of watchRevisions(connection, from, { signal: AbortSignal.any([signal, control.signal]) })) {
      for (const e of batch.events) {
        if (e.modRevision > to) return;
        yield e;
      }
      if (batch.revision >= to) return;
    }
  } finally {
    control.abort();
  }
}

async function* dbEvents(dbFile: string, after: number, to: number): AsyncGenerator<DeltaEvent> {
  const fd = openSync(dbFile, 'r');
  try {
    const reader = new BboltReader(fd);
    const bucket = reader.buckets().get('key');
    if (!bucket) return;
    for (const leaf of reader.leaves(bucket)) {
      for (const row of leafElements(leaf.page)) {
        const main = mainRevision(row.key);
        if (main <= after || row.value.length === 0) continue;
        if (main > to) return;
        yield rowEvent(row.key, row.value, main);
      }
    }
  } finally {
    closeSync(fd);
  }
}

async function* groupByRevision(
  events: AsyncIterable<DeltaEvent>,
): AsyncGenerator<{ revision: number; events: DeltaEvent[] }> {
  let group: DeltaEvent[] = [];
  for await (const e of events) {
    if (group.length > 0 && e.modRevision !== group[0].modRevision) {
      yield { revision: group[0].modRevision, events: group };
      group = [];
    }
    group.push(e);
  }
  if (group.length > 0) yield { revision: group[0].modRevision, events: group };
}

/** A key for a person: its text when printable, else hex. */
function show(key: Buffer | undefined): string {
  if (!key) return '';
  const text = key.toString('utf8');
  return /^[\x20-\x7e]*$/.test(text) ? text : `0x${key.toString('hex')}`;
}

function describe(kv: KeyState | undefined): string {
  if (!kv) return 'absent';
  const value = /^[\x20-\x7e]{0,40}$/.test(kv.value.toString('latin1'))
    ? JSON.stringify(kv.value.toString('latin1'))
    : `${kv.value.length} bytes`;
  return `value ${value}, create ${kv.createRevision}, mod ${kv.modRevision}, version ${kv.version}, lease ${kv.lease}`;
}

function writes(events: readonly DeltaEvent[]): string {
  if (events.length === 0) return 'nothing';
  return events
    .map((e) => (e.type === 'put' ? `put ${show(e.key)} (${describe(e)})` : `delete ${show(e.key)}`))
    .join(', ');
}
