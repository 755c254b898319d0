import {
  type CompressionPolicy,
  compressionSuffix,
  compressor,
  type DeltaEvent,
  encodeDelta,
  type SnapStore,
  snapshotName,
} from '@etcd-steward/core';
import type { Etcd3, IEvent, IWatchResponse } from 'etcd3';

/**
 * Delta snapshots made by hand, the way the sidecar makes them: a watch of the source etcd from a revision,
 * events encoded with the ebr-compatible codec, stored under ebr's names. Tests build chains with these and
 * compare what a restore rebuilds with the source's fingerprint at the same revision.
 */

/** Every event of revisions `from..to` (inclusive), as a watch delivers them. */
export async function watchEvents(
  client: Etcd3,
  from: number,
  to: number,
  time: (revision: number) => string = () => new Date().toISOString(),
): Promise<DeltaEvent[]> {
  const events: DeltaEvent[] = [];
  if (to < from) return events;
  const watcher = await client.watch().prefix('').startRevision(String(from)).create();
  try {
    await new Promise<void>((resolve, reject) => {
      watcher.on('error', reject);
      watcher.on('data', (res: IWatchResponse) => {
        for (const e of res.events) {
          const modRevision = Number(e.kv.mod_revision);
          if (modRevision <= to) events.push(toDeltaEvent(e, time(modRevision)));
        }
        if (events.length > 0 && events[events.length - 1].modRevision >= to) resolve();
      });
    });
  } finally {
    await watcher.cancel();
  }
  return events;
}

export interface StoredDelta {
  name: string;
  startRevision: number;
  lastRevision: number;
}

/**
 * Stores `events` as deltas cut before each revision in `cuts`: with cuts [10, 20] and events 5..25, the
 * deltas hold 5..9, 10..19 and 20..25. Each delta's start is the previous one's last + 1, and the first
 * starts at `startRevision` (the full snapshot's revision + 1).
 */
export async function storeDeltas(
  store: SnapStore,
  events: readonly DeltaEvent[],
  options: {
    startRevision: number;
    cuts?: number[];
    compression?: CompressionPolicy;
    createdAt?: (last: number) => number;
  },
): Promise<StoredDelta[]> {
  const stored: StoredDelta[] = [];
  const bounds = [...(options.cuts ?? []).filter((c) => c > options.startRevision), Number.POSITIVE_INFINITY];
  let start = options.startRevision;
  let i = 0;
  for (const bound of bounds) {
    const part: DeltaEvent[] = [];
    while (i < events.length && events[i].modRevision < bound) part.push(events[i++]);
    if (part.length === 0) continue;
    const last = part[part.length - 1].modRevision;
    const compression = options.compression ?? 'gzip';
    const name = snapshotName({
      kind: 'Incr',
      startRevision: start,
      lastRevision: last,
      createdAt: options.createdAt?.(last) ?? Math.floor(Date.now() / 1000),
      compression: compressionSuffix(compression),
      final: false,
    });
    await store.put(name, encodeDelta(part).pipe(compressor(compression)));
    stored.push({ name, startRevision: start, lastRevision: last });
    start = last + 1;
  }
  return stored;
}

/** An event as etcd3's Watcher delivers it, in the delta format. */
export function toDeltaEvent(e: IEvent, time: string): DeltaEvent {
  return {
    type: e.type === 'Delete' ? 'delete' : 'put',
    key: e.kv.key,
    value: e.kv.value ?? Buffer.alloc(0),
    createRevision: Number(e.kv.create_revision),
    modRevision: Number(e.kv.mod_revision),
    version: Number(e.kv.version),
    lease: String(e.kv.lease ?? '0'),
    time,
  };
}

/**
 * `revisions` revisions of events made up without an etcd, from `startRevision` on, as etcd records them:
 * puts that create keys under `prefix` or overwrite them (create revision and version carried on), deletes,
 * and every tenth revision a txn of three puts. For chains too long to write through etcd in a test; the keys
 * under `prefix` must not exist before `startRevision`.
 */
export function syntheticEvents(options: {
  startRevision: number;
  revisions: number;
  prefix?: string;
  keys?: number;
  valueSize?: number;
}): DeltaEvent[] {
  const prefix = options.prefix ?? '/synthetic/';
  const keyCount = options.keys ?? 5000;
  const filler = 'x'.repeat(options.valueSize ?? 100);
  const live = new Map<number, { createRevision: number; version: number }>();
  const time = new Date().toISOString();
  const events: DeltaEvent[] = [];
  const key = (i: number) => Buffer.from(`${prefix}${String(i).padStart(6, '0')}`);
  const put = (i: number, revision: number) => {
    const before = live.get(i);
    const now = { createRevision: before?.createRevision ?? revision, version: (before?.version ?? 0) + 1 };
    live.set(i, now);
    events.push({
      type: 'put',
      key: key(i),
      value: Buffer.from(`${revision}:${filler}`),
      modRevision: revision,
      ...now,
      lease: '0',
      time,
    });
  };
  for (let n = 0; n < options.revisions; n++) {
    const revision = options.startRevision + n;
    const i = (n * 7919) % keyCount;
    if (n % 10 === 9) {
      for (const j of [i, (i + 1) % keyCount, (i + 2) % keyCount]) put(j, revision);
    } else if (n % 10 === 7 && live.has(i)) {
      live.delete(i);
      const e = { key: key(i), value: Buffer.alloc(0), modRevision: revision, createRevision: 0, version: 0 };
      events.push({ type: 'delete', ...e, lease: '0', time });
    } else {
      put(i, revision);
    }
  }
  return events;
}
