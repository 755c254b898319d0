import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreObject } from '../../../test/fixtures.js';
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
});
