import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import { DeltaDecoder, type DeltaEvent, decompressor } from '@etcd-steward/core';
import { OpenDelta, Spool } from '@etcd-steward/snapshot';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { putEvent } from './put-event.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'open-delta-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function eventsOf(spool: Spool): Promise<string[]> {
  const decoder = new DeltaDecoder('spooled');
  const [, events] = await Promise.all([
    pipeline(spool.read(spool.first()!), decompressor('.zst'), decoder),
    decoder.toArray() as Promise<DeltaEvent[]>,
  ]);
  return events.map((e) => `${e.modRevision}:${e.key}`);
}

it('writes events to the spool as they come and queues them as one delta named for its revisions', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const open = OpenDelta.begin(spool, 5, 'zstd', spool.newLine());
  await open.add([putEvent(5), putEvent(6, 'a'), putEvent(6, 'b')]);
  // Many small batches, more than one chunk of JSON: what a busy watch delivers.
  for (let r = 7; r <= 400; r++) await open.add([putEvent(r)]);
  expect(open.bytes).toBeGreaterThan(397 * 400); // base64 grows 300 bytes to 400
  expect(spool.depth).toBe(0);

  const delta = await open.finish();
  expect(delta).toMatchObject({ startRevision: 5, lastRevision: 400, oldestEventAt: Date.parse(putEvent(5).time) });
  expect(delta.name).toMatch(/^v2\/Incr-00000005-00000400-\d+\.zst$/);
  expect(spool.list()).toEqual([delta]);
  const events = await eventsOf(spool);
  expect(events.slice(0, 4)).toEqual(['5:k5', '6:a', '6:b', '7:k7']);
  expect(events).toHaveLength(397);
  expect(await readdir(join(dir, 'deltas'))).toEqual([delta.name.slice(3)]);
  spool.close();
});

it('reads back whole however its file is split into reads, also when it ends while the compressor is busy', async () => {
  const spool = await Spool.open(dir, 1 << 30);
  const open = OpenDelta.begin(spool, 5, 'zstd', spool.newLine());
  // Incompressible values in large batches: the compressor still has writes queued when the delta ends.
  for (let r = 5; r < 1_005; r += 100) {
    await open.add(Array.from({ length: 100 }, (_, i) => ({ ...putEvent(r + i), value: randomBytes(2_000) })));
  }
  const delta = await open.finish();
  const bytes = await buffer(spool.read(delta));
  for (let cut = bytes.length - 12; cut < bytes.length; cut++) {
    const decoder = new DeltaDecoder('split');
    const [, events] = await Promise.all([
      pipeline(Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)]), decompressor('.zst'), decoder),
      decoder.toArray(),
    ]);
    expect(events).toHaveLength(1_000);
  }
  spool.close();
});

it('accepts only events that continue its revisions without a gap', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const open = OpenDelta.begin(spool, 5, 'zstd', spool.newLine());
  expect(open.gap([putEvent(6)])).toBe('expected revision 5, got 6');
  expect(open.gap([putEvent(5), putEvent(5, 'again'), putEvent(6)])).toBeUndefined();
  await open.add([putEvent(5), putEvent(6)]);
  expect(open.gap([putEvent(8)])).toBe('expected revision 7, got 8');
  await open.discard();
  spool.close();
});

it('leaves nothing behind when discarded', async () => {
  const spool = await Spool.open(dir, 1 << 20);
  const open = OpenDelta.begin(spool, 5, 'zstd', spool.newLine());
  await open.add([putEvent(5), putEvent(6)]);
  await open.discard();
  expect(spool.depth).toBe(0);
  expect(await readdir(join(dir, 'deltas'))).toEqual([]);
  spool.close();
});
