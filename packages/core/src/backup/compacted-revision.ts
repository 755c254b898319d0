import { createHash } from 'node:crypto';
import { errorMessage } from '../common/errors.js';
import { ProtoCursor, writeMessage } from '../common/protobuf-wire.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { grpcUnary } from '../etcd/etcd-grpc.js';
import type { DeltaEvent } from '../format/delta-format.js';

/*
 * etcd's compaction at revision C keeps, per key, the newest version at or below C and drops the deletes at or
 * below C. A watch from C is allowed, yet it shows C's puts and not C's deletes, so what etcd wrote at the very
 * revision it compacted at cannot be read as events; its state there still can, by ranges at C.
 */

/** Where etcd's compaction stands against a revision: below it, at it (its deletes are gone from the history), past it. */
export type Compaction = 'below' | 'at' | 'past';

const COMPACTED = /required revision has been compacted/;
/** Ranges in flight at once while one revision's keys are read. */
const CONCURRENCY = 8;

/**
 * Where etcd's compaction stands against `revision` (not past etcd's current one): a range at `revision - 1` fails
 * exactly when etcd compacted at `revision` or later, one at `revision` when it compacted later. `token`: the
 * connection's auth token (etcdAuthToken), asked once by the caller for all its calls.
 */
export async function compactionAt(
  connection: EtcdConnection,
  token: string | undefined,
  revision: number,
): Promise<Compaction> {
  if (revision <= 1) return 'below';
  if ((await rangeAt(connection, token, Buffer.from([0]), revision - 1)) !== 'compacted') return 'below';
  return (await rangeAt(connection, token, Buffer.from([0]), revision)) === 'compacted' ? 'past' : 'at';
}

/**
 * Whether etcd's state at `revision` is what `events` (a stored revision's, all of them) made it: each key put
 * there with the event's value, create revision, version and lease, each key deleted there absent. 'compacted'
 * once etcd compacted past `revision`. Writes etcd made there to keys the events do not name are not seen.
 */
export async function etcdHoldsEvents(
  connection: EtcdConnection,
  token: string | undefined,
  revision: number,
  events: readonly DeltaEvent[],
): Promise<boolean | 'compacted'> {
  if (events.length === 0 || events.some((e) => e.modRevision !== revision)) return false;
  for (let i = 0; i < events.length; i += CONCURRENCY) {
    const batch = events.slice(i, i + CONCURRENCY);
    const found = await Promise.all(batch.map((e) => rangeAt(connection, token, e.key, revision)));
    if (found.includes('compacted')) return 'compacted';
    if (!batch.every((e, j) => sameState(e, found[j] as KeyState | undefined))) return false;
  }
  return true;
}

/**
 * What etcd's current state says of `events` (a stored revision's, all of them) once etcd compacted past their
 * revision R, where neither a watch nor a range at R can read it any more (stateTells, key by key). 'unknown' when
 * every key named was deleted or made again since.
 */
export async function etcdStateAgrees(
  connection: EtcdConnection,
  token: string | undefined,
  events: readonly DeltaEvent[],
): Promise<'same' | 'different' | 'unknown'> {
  const states = await currentKeyStates(
    connection,
    token,
    events.map((e) => e.key),
  );
  let verdict: 'same' | 'unknown' = 'unknown';
  for (const e of events) {
    const told = stateTells(e, states.get(e.key.toString('latin1')));
    if (told === 'different') return told;
    if (told === 'same') verdict = told;
  }
  return verdict;
}

/** The state etcd holds now of each of `keys` (undefined where absent), by their latin1 spelling. */
export async function currentKeyStates(
  connection: EtcdConnection,
  token: string | undefined,
  keys: readonly Buffer[],
): Promise<Map<string, KeyState | undefined>> {
  const states = new Map<string, KeyState | undefined>();
  for (let i = 0; i < keys.length; i += CONCURRENCY) {
    const batch = keys.slice(i, i + CONCURRENCY);
    const found = await Promise.all(batch.map((key) => rangeAt(connection, token, key, 0)));
    for (const [j, key] of batch.entries())
      states.set(key.toString('latin1'), found[j] === 'compacted' ? undefined : found[j]);
  }
  return states;
}

/**
 * What a key's state in etcd now (`kv`, at a revision at or past the event's) says of one stored event at revision R.
 * A key put at R and not written since still carries mod revision R: its value, create revision, version and lease
 * must be the event's; a key created at R and alive ever since still carries create revision R. A key alive since
 * before R tells a different history where the event deleted it there, or put it with another create revision or
 * a version it has not reached, and so does a key whose newest write is older than R. Undefined where the key is gone
 * or made again since: it tells nothing.
 */
export function stateTells(event: DeltaEvent, kv: KeyState | undefined): 'same' | 'different' | undefined {
  if (!kv || kv.createRevision > event.modRevision) return undefined;
  if (event.type === 'delete') return 'different';
  if (kv.modRevision === event.modRevision) return sameState(event, kv) ? 'same' : 'different';
  if (kv.modRevision < event.modRevision || kv.createRevision !== event.createRevision || kv.version < event.version)
    return 'different';
  return event.createRevision === event.modRevision ? 'same' : undefined; // created there, and alive ever since
}

/** A key as etcd holds it; its value by digest, so that many can be held at once. */
export interface KeyState {
  valueDigest: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease: string;
}

function sameState(event: DeltaEvent, kv: KeyState | undefined): boolean {
  if (event.type === 'delete') return kv === undefined;
  return (
    kv !== undefined &&
    kv.modRevision === event.modRevision &&
    kv.createRevision === event.createRevision &&
    kv.version === event.version &&
    kv.lease === event.lease &&
    kv.valueDigest === valueDigest(event.value)
  );
}

/**
 * KV/Range `RangeRequest{1 key, 4 revision, 7 serializable}` of one key at `revision` (0: now), as the member itself
 * holds it (a watch reads the member's own history too): the key, undefined when absent, or 'compacted'.
 */
async function rangeAt(
  connection: EtcdConnection,
  token: string | undefined,
  key: Buffer,
  revision: number,
): Promise<KeyState | undefined | 'compacted'> {
  let response: Buffer;
  try {
    response = await grpcUnary(
      connection,
      '/etcdserverpb.KV/Range',
      writeMessage([
        [1, key],
        [4, revision],
        [7, 1],
      ]),
      { token },
    );
  } catch (err) {
    if (COMPACTED.test(errorMessage(err))) return 'compacted';
    throw err;
  }
  // RangeResponse{2 kvs: KeyValue{1 key, 2 create_revision, 3 mod_revision, 4 version, 5 value, 6 lease}}
  for (const f = new ProtoCursor(response); f.next(); ) {
    if (f.field !== 2 || f.wire !== 2) continue;
    const kv: KeyState = {
      valueDigest: valueDigest(Buffer.alloc(0)),
      createRevision: 0,
      modRevision: 0,
      version: 0,
      lease: '0',
    };
    for (const field = f.embedded(); field.next(); ) {
      if (field.wire === 2 && field.field === 5) kv.valueDigest = valueDigest(field.bytes());
      else if (field.wire === 0 && field.field === 2) kv.createRevision = field.value;
      else if (field.wire === 0 && field.field === 3) kv.modRevision = field.value;
      else if (field.wire === 0 && field.field === 4) kv.version = field.value;
      else if (field.wire === 0 && field.field === 6) kv.lease = String(BigInt.asIntN(64, field.bigint()));
    }
    return kv;
  }
  return undefined;
}

function valueDigest(value: Buffer): string {
  return createHash('sha256').update(value).digest('base64');
}
