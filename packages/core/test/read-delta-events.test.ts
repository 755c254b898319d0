import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readDeltaEvents, readDeltaRevisions } from '../src/backup/fetch-delta.js';
import type { CatalogEntry } from '../src/backup/snapshot-catalog.js';
import { type DeltaEvent, encodeDelta } from '../src/format/delta-format.js';

const dir = await mkdtemp(join(tmpdir(), 'read-delta-events-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

const put = (revision: number, size = 3000): DeltaEvent => ({
  type: 'put',
  key: Buffer.from(`/k/${revision}`),
  value: Buffer.alloc(size, revision % 251),
  createRevision: revision,
  modRevision: revision,
  version: 1,
  lease: '0',
  time: '2026-11-27T00:00:00Z',
});

async function deltaFile(name: string, events: DeltaEvent[]): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of encodeDelta(events)) parts.push(chunk);
  const file = join(dir, name);
  await writeFile(file, Buffer.concat(parts));
  return file;
}

const entry = (start: number, last: number) => ({ startRevision: start, lastRevision: last }) as CatalogEntry;

async function read(
  file: string,
  e: CatalogEntry,
  verified: boolean,
): Promise<{ revisions: number[]; error?: string }> {
  const revisions: number[] = [];
  try {
    for await (const event of readDeltaEvents(file, e, 'd', { verified })) revisions.push(event.modRevision);
    return { revisions };
  } catch (err) {
    return { revisions, error: (err as Error).message };
  }
}

describe('readDeltaEvents', () => {
  it('reads a delta of many reads and pieces whole, verified or not', async () => {
    // ~3 MiB of events: several 1 MiB reads, events spanning the 64 KiB pieces they are parsed in
    const events = Array.from({ length: 1000 }, (_, i) => put(100 + i));
    const file = await deltaFile('whole.json', events);
    for (const verified of [false, true]) {
      expect(await read(file, entry(100, 1099), verified)).toEqual({ revisions: events.map((e) => e.modRevision) });
    }
  });

  it('hands on every event before one that breaks the order, then fails naming it', async () => {
    const events = [...Array.from({ length: 40 }, (_, i) => put(10 + i)), put(30), put(51)];
    const file = await deltaFile('back.json', events);
    const { revisions, error } = await read(file, entry(10, 51), true);
    expect(revisions).toEqual(Array.from({ length: 40 }, (_, i) => 10 + i));
    expect(error).toBe('d: its revisions go back from 49 to 30');
  });
});

/** The revisions read, each as [revision, its events' keys], and the error that ended the read. */
async function revisionsOf(
  file: string,
  e: CatalogEntry,
): Promise<{ revisions: [number, string[]][]; error?: string }> {
  const revisions: [number, string[]][] = [];
  try {
    for await (const batch of readDeltaRevisions(file, e, 'd', { verified: true })) {
      for (const r of batch) revisions.push([r.revision, r.events.map((event) => event.key.toString())]);
    }
    return { revisions };
  } catch (err) {
    return { revisions, error: (err as Error).message };
  }
}

/** A txn of `count` puts at `revision`, each key named by its place in the txn. */
const txn = (revision: number, count: number): DeltaEvent[] =>
  Array.from({ length: count }, (_, sub) => ({ ...put(revision), key: Buffer.from(`/t/${revision}/${sub}`) }));

describe('readDeltaRevisions', () => {
  it('hands on whole revisions, a txn of ~90 KiB spanning the 64 KiB pieces as one', async () => {
    const events = [put(10), ...txn(11, 30), put(12), ...txn(13, 2)];
    const file = await deltaFile('txns.json', events);
    expect(await revisionsOf(file, entry(10, 13))).toEqual({
      revisions: [
        [10, ['/k/10']],
        [11, Array.from({ length: 30 }, (_, sub) => `/t/11/${sub}`)],
        [12, ['/k/12']],
        [13, ['/t/13/0', '/t/13/1']],
      ],
    });
  });

  it('hands on the whole revisions before one that breaks the order, never the one cut short', async () => {
    // revision 11's txn is whole before the fault; 12's second half never comes, so 12 is not handed on
    const events = [put(10), ...txn(11, 3), put(12), put(12), put(11)];
    const file = await deltaFile('cut.json', events);
    const { revisions, error } = await revisionsOf(file, entry(10, 12));
    expect(revisions.map(([revision, keys]) => [revision, keys.length])).toEqual([
      [10, 1],
      [11, 3],
    ]);
    expect(error).toBe('d: its revisions go back from 12 to 11');
  });
});
