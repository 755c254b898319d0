import { createHash } from 'node:crypto';
import { detachedCopy } from '../bbolt/bbolt-file.js';
import type { DeltaEvent } from '../format/delta-format.js';
import { formatRfc3339Nanos, parseRfc3339Nanos } from '../format/event-time.js';
import type { DbKey } from './db-keys.js';
import { type KeyFilter, keyMatches, keyText } from './key-filter.js';
import { kubernetesKey } from './kubernetes-key.js';

/**
 * What a row's time means (docs/restore.md, "log"): `live`, when the sidecar received the event from a live watch
 * (etcd wrote it a watch's delay earlier); `read-back`, read back from etcd's history after a stretch the sidecar did
 * not watch live (etcd wrote it at or before that time); `unrecorded`, the delta does not say which (ebr's, or older
 * ones): a receive time either way; `snapshot`, the state a full snapshot holds, written at or before it was taken.
 */
export type TimeKind = 'live' | 'read-back' | 'unrecorded' | 'snapshot';

/** One line of a log: a write of one key, or the writes of one kind that one revision made to several (`count`). */
export interface LogRow {
  revision: number;
  /** RFC 3339 in UTC to the nanosecond, as recorded (or as the delta had it, when it is not RFC 3339). */
  time: string;
  /** `time` as nanoseconds since the epoch; undefined when it is not a time. */
  nanos?: bigint;
  timeKind: TimeKind;
  type: 'put' | 'delete';
  /** The key; for several, the bytes they all start with. */
  key: Buffer;
  /** How many keys this revision wrote this way (1 but for a txn or a `del --prefix`, without --all). */
  count: number;
  /** For several: the first and last of them, in the order etcd wrote them. */
  firstKey?: Buffer;
  lastKey?: Buffer;
  /** Bytes of the value put (for several, of all); 0 for a delete. */
  valueSize: number;
  /** sha256 of the value put, hex; for one put only. */
  valueSha256?: string;
  /** Lease ID in decimal, '0' for none (for several: theirs when they share one). */
  lease: string;
  createRevision?: number;
  version?: number;
  /** The store object the row was read from. */
  object: string;
}

/** A revision's recorded time: its first event's (revisions are never split). */
export function recordedTime(text: string): { time: string; nanos?: bigint } {
  const nanos = parseRfc3339Nanos(text);
  return nanos === undefined ? { time: text } : { time: formatRfc3339Nanos(nanos), nanos };
}

/**
 * The rows of one revision's events that `filter` asks about: one a key with `all`, otherwise one for its puts and
 * one for its deletes, each collapsing the keys it wrote (a `del --prefix` of 37 keys is one row of count 37).
 */
export function revisionRows(
  revision: number,
  events: readonly DeltaEvent[],
  filter: KeyFilter,
  context: { timeKind: TimeKind; object: string; all: boolean },
): LogRow[] {
  const matching = events.filter((e) => keyMatches(filter, e.key));
  if (matching.length === 0) return [];
  const when = recordedTime(events[0].time);
  const one = (e: DeltaEvent): LogRow => ({
    revision,
    ...when,
    timeKind: context.timeKind,
    type: e.type,
    // held until the delta's rows are turned newest first: a copy of its own, not a slice of a pooled chunk that
    // would keep the chunk's values alive too
    key: detachedCopy(e.key),
    count: 1,
    valueSize: e.value.length,
    ...(e.type === 'put' ? { valueSha256: sha256(e.value), createRevision: e.createRevision, version: e.version } : {}),
    lease: e.lease || '0',
    object: context.object,
  });
  if (context.all) return matching.map(one);
  const rows: LogRow[] = [];
  for (const type of ['put', 'delete'] as const) {
    const of = matching.filter((e) => e.type === type);
    if (of.length === 1) rows.push(one(of[0]));
    else if (of.length > 1) {
      rows.push({
        revision,
        ...when,
        timeKind: context.timeKind,
        type,
        key: detachedCopy(commonPrefix(of.map((e) => e.key))),
        count: of.length,
        firstKey: detachedCopy(of[0].key),
        lastKey: detachedCopy(of[of.length - 1].key),
        valueSize: of.reduce((sum, e) => sum + e.value.length, 0),
        lease: of.every((e) => e.lease === of[0].lease) ? of[0].lease || '0' : '0',
        object: context.object,
      });
    }
  }
  return rows;
}

/** A key as a full snapshot holds it: its last put, or its deletion, at the revision it was written. */
export function snapshotRow(key: DbKey, taken: bigint, object: string): LogRow {
  return {
    revision: key.modRevision,
    time: formatRfc3339Nanos(taken),
    nanos: taken,
    timeKind: 'snapshot',
    type: key.deleted ? 'delete' : 'put',
    key: key.key,
    count: 1,
    valueSize: key.value.length,
    ...(key.deleted
      ? {}
      : { valueSha256: sha256(key.value), createRevision: key.createRevision, version: key.version }),
    lease: key.lease,
    object,
  };
}

/** The row as one JSON object (`--output json`: one a line). */
export function logRowJson(row: LogRow): Record<string, unknown> {
  const text = keyText(row.key);
  const object = text === undefined ? undefined : kubernetesKey(text);
  const several = row.count > 1 && row.firstKey && row.lastKey ? row : undefined;
  const firstObject = several && kubernetesKey(keyText(several.firstKey as Buffer) ?? '');
  const lastObject = several && kubernetesKey(keyText(several.lastKey as Buffer) ?? '');
  return {
    revision: row.revision,
    time: row.time,
    timeKind: row.timeKind,
    type: row.type,
    ...(text === undefined ? { keyBase64: row.key.toString('base64') } : { key: text }),
    ...(several
      ? {
          count: several.count,
          firstKey: keyJson(several.firstKey as Buffer),
          lastKey: keyJson(several.lastKey as Buffer),
        }
      : {}),
    valueSize: row.valueSize,
    valueSha256: row.valueSha256 ?? null,
    ...(row.lease !== '0' ? { lease: leaseHex(row.lease) } : {}),
    ...(row.createRevision !== undefined ? { createRevision: row.createRevision, version: row.version } : {}),
    ...(object ? { resource: object.resource, namespace: object.namespace, name: object.name } : {}),
    ...(several && firstObject && lastObject && firstObject.resource === lastObject.resource
      ? {
          resource: firstObject.resource,
          ...(firstObject.namespace === lastObject.namespace ? { namespace: firstObject.namespace } : {}),
        }
      : {}),
    object: row.object,
  };
}

/** A lease ID as etcdctl's lease commands print and take it: 16 hex digits. */
export function leaseHex(lease: string): string {
  return BigInt.asUintN(64, BigInt(lease)).toString(16).padStart(16, '0');
}

function keyJson(key: Buffer): string {
  return keyText(key) ?? `base64:${key.toString('base64')}`;
}

function sha256(value: Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

function commonPrefix(keys: readonly Buffer[]): Buffer {
  let length = keys[0].length;
  for (const key of keys) {
    let i = 0;
    while (i < length && i < key.length && key[i] === keys[0][i]) i++;
    length = i;
  }
  return keys[0].subarray(0, length);
}
