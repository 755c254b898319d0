import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  nextProofRecord,
  PROOF_RECORD,
  parseProofRecord,
  readProofRecord,
  writeProofRecord,
} from '../src/backup/proof-record.js';
import { LocalStore } from '../src/store/local.js';

/** The restore drill's record in the store (backup/proof-record.ts): what the sidecar reads for its metrics. */
describe("the drill's proof record", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'proof-record-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('keeps the last proven revision through failures, and counts them by outcome', async () => {
    const store = new LocalStore(join(dir, 'store'));
    expect(await readProofRecord(store)).toBeUndefined();
    const t = (minutes: number) => new Date(Date.UTC(2026, 10, 27, 6, minutes));
    let record = nextProofRecord(undefined, { outcome: 'proven', revision: 100 }, t(0));
    await writeProofRecord(store, record);
    record = nextProofRecord(
      await readProofRecord(store),
      { outcome: 'mismatch', revision: 150, reason: 'key /a' },
      t(60),
    );
    await writeProofRecord(store, record);
    record = nextProofRecord(
      await readProofRecord(store),
      { outcome: 'unprovable', revision: 160, reason: 'x' },
      t(120),
    );
    await writeProofRecord(store, record);
    record = nextProofRecord(
      await readProofRecord(store),
      { outcome: 'mismatch', revision: 170, reason: 'key /b' },
      t(180),
    );
    await writeProofRecord(store, record);
    expect(await readProofRecord(store)).toEqual({
      version: 1,
      checkedAt: t(180).toISOString(),
      outcome: 'mismatch',
      revision: 170,
      reason: 'key /b',
      provenRevision: 100,
      provenAt: t(0).toISOString(),
      failures: { mismatch: 2, unprovable: 1 },
    });
    await writeProofRecord(
      store,
      nextProofRecord(await readProofRecord(store), { outcome: 'proven', revision: 200 }, t(240)),
    );
    expect(await readProofRecord(store)).toMatchObject({
      provenRevision: 200,
      failures: { mismatch: 2, unprovable: 1 },
    });
  });

  it('refuses a record that is not one, naming what is wrong', async () => {
    const bad = (text: string) => () => parseProofRecord(text, 'proofs/latest.json');
    expect(bad('nope')).toThrow(/proofs\/latest.json is not JSON/);
    expect(bad('{"version":2}')).toThrow(/version 2, this program reads 1/);
    expect(bad('{"version":1,"checkedAt":"2026-11-27T06:00:00Z","outcome":"fine","failures":{}}')).toThrow(
      /outcome fine/,
    );
    expect(
      bad('{"version":1,"checkedAt":"2026-11-27T06:00:00Z","outcome":"proven","provenRevision":-3,"failures":{}}'),
    ).toThrow(/provenRevision is not a revision/);
    expect(bad('{"version":1,"checkedAt":"yesterday","outcome":"proven","failures":{}}')).toThrow(
      /checkedAt is not a time/,
    );
    const store = new LocalStore(join(dir, 'big'));
    await mkdir(join(dir, 'big', 'proofs'), { recursive: true });
    await writeFile(join(dir, 'big', PROOF_RECORD), Buffer.alloc(100_000, 0x20));
    await expect(readProofRecord(store)).rejects.toThrow(/not a drill record/);
  });
});
