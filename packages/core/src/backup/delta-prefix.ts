import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COMPRESSION_POLICIES, type CompressionPolicy, compressionName } from '../format/compression.js';
import type { DeltaEvent } from '../format/delta-format.js';
import { METADATA_READ_BACK, parseReadBack } from '../format/read-back.js';
import type { SnapStore } from '../store/snapstore.js';
import { fetchDelta, readDeltaEvents } from './fetch-delta.js';
import type { CatalogEntry } from './snapshot-catalog.js';
import { storeDelta } from './stored-delta.js';

/**
 * Stores the first revisions of a delta, through `lastRevision`, as a delta of their own in `v2/`: named for them,
 * with the original's creation time and compression (gzip for ebr's `.Z`, which we only read). A set-aside keeps so
 * the revisions a delta that straddles the fork shares with the history going on: setting it aside whole would
 * leave them in no delta once etcd compacted them. The original is checked as a restore checks it; nothing of it is
 * used that did not verify. Returns the new delta's name.
 */
export async function storeDeltaPrefix(
  store: SnapStore,
  entry: CatalogEntry,
  lastRevision: number,
  options: { signal?: AbortSignal } = {},
): Promise<string> {
  const name = compressionName(entry.compression);
  const compression = (COMPRESSION_POLICIES as readonly string[]).includes(name) ? (name as CompressionPolicy) : 'gzip';
  const metadata = Object.keys(entry.metadata).length > 0 ? entry.metadata : (await store.stat(entry.name))?.metadata;
  const readBack = parseReadBack(metadata?.[METADATA_READ_BACK])
    ?.filter(([first]) => first <= lastRevision)
    .map(([first, last]): [number, number] => [first, Math.min(last, lastRevision)]);
  const dir = await mkdtemp(join(tmpdir(), 'etcd-steward-delta-prefix-'));
  try {
    const whole = join(dir, 'delta.json');
    await fetchDelta(store, entry, whole, { signal: options.signal });
    const events = readDeltaEvents(whole, entry, `${store.location}/${entry.name}`, { verified: true });
    return await storeDelta(
      store,
      { startRevision: entry.startRevision, lastRevision, createdAt: entry.createdAt, compression, readBack },
      eventsThrough(events, lastRevision),
      { tempDir: dir, signal: options.signal },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function* eventsThrough(events: AsyncIterable<DeltaEvent>, lastRevision: number): AsyncGenerator<DeltaEvent> {
  for await (const e of events) {
    if (e.modRevision > lastRevision) return;
    yield e;
  }
}
