import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { compressor, DeltaDecoder, type DeltaEvent, decompressor, encodeDelta } from '@etcd-steward/core';
import { Spool, trimDelta } from '@etcd-steward/snapshot';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { putEvent } from './put-event.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'delta-trim-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const name = (start: number, last: number) =>
  `v2/Incr-${String(start).padStart(8, '0')}-${String(last).padStart(8, '0')}-1795313340.zst`;

it('rewrites a spooled delta to start after a revision, in its place, keeping whole revisions', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const events = [putEvent(10), putEvent(11), putEvent(12, 'a'), putEvent(12, 'b'), putEvent(13)];
  const first = await spool.add(
    { name: name(10, 13), startRevision: 10, lastRevision: 13, oldestEventAt: 1 },
    encodeDelta(events),
    compressor('zstd'),
  );
  await spool.add(
    { name: name(14, 14), startRevision: 14, lastRevision: 14, oldestEventAt: 2 },
    encodeDelta([putEvent(14)]),
  );

  const trimmed = await trimDelta(spool, first, 11, 'zstd');
  expect(trimmed).toMatchObject({ id: first.id, name: name(12, 13), startRevision: 12, lastRevision: 13 });
  expect(spool.list().map((d) => d.name)).toEqual([name(12, 13), name(14, 14)]);
  const decoder = new DeltaDecoder('trimmed');
  const [, kept] = await Promise.all([
    pipeline(spool.read(spool.first()!), decompressor('.zst'), decoder),
    decoder.toArray() as Promise<DeltaEvent[]>,
  ]);
  expect(kept.map((e) => `${e.modRevision}:${e.key}`)).toEqual(['12:a', '12:b', '13:k13']);
  spool.close();
});
