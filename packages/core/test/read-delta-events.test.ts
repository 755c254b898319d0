import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readDeltaEvents } from '../src/backup/fetch-delta.js';
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
