import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreObject } from '../../../test/fixtures.js';
import { fetchDelta } from '../src/backup/fetch-delta.js';
import { fetchFullSnapshot } from '../src/backup/fetch-full-snapshot.js';
import { listSnapshots } from '../src/backup/snapshot-catalog.js';
import { LocalStore } from '../src/store/local.js';
import type { SnapStore } from '../src/store/snapstore.js';

const fixture = ebrStoreObject('Full-00000000-00000007-1795299379');
const NAME = 'v2/Full-00000000-00000007-1795299379.gz';

/** What S3 does: listings carry no object metadata, only stat does. */
function withoutListedMetadata(store: SnapStore): SnapStore {
  return Object.assign(Object.create(store) as SnapStore, {
    list: async (prefix?: string) => (await store.list(prefix)).map((o) => ({ ...o, metadata: {} })),
  });
}

describe('the sha256 recorded with a stored object', () => {
  let dir: string;
  let store: LocalStore;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stored-digest-'));
    store = new LocalStore(join(dir, 'store'));
    const stored = gzipSync(await readFile(fixture), { level: 6 });
    const sha256 = createHash('sha256').update(stored).digest('hex');
    await store.put(NAME, Readable.from([stored]), { metadata: { sha256 } });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is checked even when the listing does not carry it', async () => {
    const listed = withoutListedMetadata(store);
    const [entry] = await listSnapshots(listed);
    expect(entry.metadata).toEqual({});
    await expect(fetchFullSnapshot(listed, entry, join(dir, 'ok.db'))).resolves.toMatchObject({ revision: 7 });

    // The same db compressed differently: etcd's trailer still matches, only the recorded sha256 can tell.
    await writeFile(join(dir, 'store', ...NAME.split('/')), gzipSync(await readFile(fixture), { level: 1 }));
    await expect(fetchFullSnapshot(listed, entry, join(dir, 'bad.db'))).rejects.toThrow(
      /do not match the sha256 recorded when it was stored/,
    );
  });

  it("proves the content it was taken of, so etcd's trailer is found in its place but not hashed again; an object without one (ebr's) is checked by its trailer", async () => {
    // We record a sha256 only of content checked first; bytes that match it need no second hash of the db.
    const db = await readFile(fixture);
    const otherTrailer = Buffer.from(db);
    otherTrailer[otherTrailer.length - 1] ^= 0x01;
    const put = async (at: string, bytes: Buffer, recorded: boolean) => {
      const target = new LocalStore(join(dir, at));
      const stored = gzipSync(bytes);
      const sha256 = createHash('sha256').update(stored).digest('hex');
      await target.put(NAME, Readable.from([stored]), { metadata: recorded ? { sha256 } : {} });
      const [entry] = await listSnapshots(target);
      return () => fetchFullSnapshot(target, entry, join(dir, `${at}.db`));
    };
    const proven = await (await put('proven', otherTrailer, true))();
    expect(proven.revision).toBe(7);
    expect(proven.dbSha256).toBe(otherTrailer.subarray(-32).toString('hex'));
    await expect((await put('unproven', otherTrailer, false))()).rejects.toThrow(
      /damaged: its content does not match its sha256 trailer/,
    );
    // the trailer's place is still checked: a db cut short is refused whatever was recorded of it
    await expect((await put('cut', db.subarray(0, db.length - 100), true))()).rejects.toThrow(
      /truncated or not an etcd snapshot/,
    );
  });

  it('likewise proves a delta: its own trailer is then not hashed again, one without a recorded sha256 is', async () => {
    const delta = await readFile(ebrStoreObject('Incr-00000008-00000008-1795299383'));
    const otherTrailer = Buffer.from(delta);
    otherTrailer[otherTrailer.length - 1] ^= 0x01;
    const name = 'v2/Incr-00000008-00000008-1795299383';
    const fetch = async (at: string, recorded: boolean) => {
      const target = new LocalStore(join(dir, at));
      const sha256 = createHash('sha256').update(otherTrailer).digest('hex');
      await target.put(name, Readable.from([otherTrailer]), { metadata: recorded ? { sha256 } : {} });
      const [entry] = await listSnapshots(target);
      return fetchDelta(target, entry, join(dir, `${at}.json`));
    };
    await expect(fetch('delta-proven', true)).resolves.toMatchObject({ size: delta.length });
    await expect(fetch('delta-unproven', false)).rejects.toThrow(/does not match its sha256 trailer/);
  });
});
