// One etcd version: a store test server, no etcd
/**
 * The GCS test server's object versioning, as the real `@google-cloud/storage` client and a plain media download meet
 * it: what an attacker's overwrite or delete leaves in a versioned bucket, and what a delete by generation removes.
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GcsTestServer, startGcsServer } from './servers/gcs-server.js';

/** The part of the client these tests use. */
interface GcsFile {
  name: string;
  metadata: { generation?: string | number; timeDeleted?: string };
  save(data: Buffer, options?: { resumable?: boolean }): Promise<void>;
  download(): Promise<[Buffer]>;
  delete(): Promise<unknown>;
  getMetadata(): Promise<[{ generation?: string; timeDeleted?: string }]>;
}
interface ListQuery {
  versions?: boolean;
  prefix?: string;
  delimiter?: string;
  maxResults?: number;
  pageToken?: string;
  autoPaginate?: boolean;
}
interface GcsClient {
  bucket(name: string): {
    file(name: string, options?: { generation?: number | string }): GcsFile;
    getFiles(query?: ListQuery): Promise<[GcsFile[], ListQuery | null, { prefixes?: string[] }]>;
  };
}
// From core's dependencies: the tests' own package does not list the SDK.
const { Storage } = createRequire(new URL('../packages/core/package.json', import.meta.url))(
  '@google-cloud/storage',
) as { Storage: new (options: Record<string, unknown>) => GcsClient };

let server: GcsTestServer;
let storage: GcsClient;
beforeAll(async () => {
  delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  server = await startGcsServer();
  storage = new Storage({ apiEndpoint: server.endpoint, projectId: 'test', retryOptions: { autoRetry: false } });
});
afterAll(() => server?.stop());

let buckets = 0;
/** A bucket of its own for each test, versioned unless told. */
function newBucket(versioning = true) {
  const name = `bucket-${buckets++}`;
  server.createBucket(name);
  server.configureBucket(name, { versioning });
  return { name, bucket: storage.bucket(name) };
}

/** Every generation under `prefix` as the client lists it, and whether it is noncurrent. */
async function versions(bucket: ReturnType<GcsClient['bucket']>, prefix?: string) {
  const [files] = await bucket.getFiles({ versions: true, prefix });
  return files.map((f) => ({
    name: f.name,
    generation: String(f.metadata.generation),
    noncurrent: !!f.metadata.timeDeleted,
  }));
}

const generationOf = async (file: GcsFile) => String((await file.getMetadata())[0].generation);
const NAME = 'v2/Full 00000001.gz';

describe('a versioned bucket', () => {
  it('keeps what an overwrite and a delete replaced as noncurrent generations, listed and read back byte-exact', async () => {
    const { bucket } = newBucket();
    const bodies = [randomBytes(300_000), randomBytes(1000)];
    await bucket.file(NAME).save(bodies[0], { resumable: false });
    const first = await generationOf(bucket.file(NAME));
    await bucket.file(NAME).save(bodies[1]); // resumable (the client's default), the other way an upload completes
    const second = await generationOf(bucket.file(NAME));
    expect(Number(second)).toBeGreaterThan(Number(first));
    expect(await versions(bucket)).toEqual([
      { name: NAME, generation: first, noncurrent: true },
      { name: NAME, generation: second, noncurrent: false },
    ]);

    await bucket.file(NAME).delete();
    expect((await bucket.getFiles())[0]).toEqual([]);
    await expect(bucket.file(NAME).download()).rejects.toMatchObject({ code: 404 });
    const [listed] = await bucket.getFiles({ versions: true });
    expect(listed.map((f) => String(f.metadata.generation))).toEqual([first, second]);
    for (const f of listed) expect(new Date(f.metadata.timeDeleted ?? '').getTime()).toBeGreaterThan(0);
    expect((await bucket.file(NAME, { generation: first }).getMetadata())[0]).toMatchObject({
      generation: first,
      timeDeleted: expect.any(String),
    });
    for (const [i, generation] of [first, second].entries()) {
      const [data] = await bucket.file(NAME, { generation }).download();
      expect(data.equals(bodies[i])).toBe(true);
    }
    await expect(bucket.file(NAME, { generation: Number(second) + 1 }).download()).rejects.toMatchObject({
      code: 404,
    });
  });

  it('deletes just the one generation a delete names, live or noncurrent', async () => {
    const { bucket } = newBucket();
    const saved: string[] = [];
    for (const body of ['one', 'two', 'three']) {
      await bucket.file(NAME).save(Buffer.from(body), { resumable: false });
      saved.push(await generationOf(bucket.file(NAME)));
    }
    await bucket.file(NAME, { generation: saved[1] }).delete();
    expect((await versions(bucket)).map((v) => v.generation)).toEqual([saved[0], saved[2]]);
    await expect(bucket.file(NAME, { generation: saved[1] }).download()).rejects.toMatchObject({ code: 404 });
    await expect(bucket.file(NAME, { generation: saved[1] }).delete()).rejects.toMatchObject({ code: 404 });

    // The live one, by its generation: gone for good, so the name has no live generation, and no noncurrent one is
    // made of it.
    await bucket.file(NAME, { generation: saved[2] }).delete();
    expect(await versions(bucket)).toEqual([{ name: NAME, generation: saved[0], noncurrent: true }]);
    await expect(bucket.file(NAME).download()).rejects.toMatchObject({ code: 404 });
    await expect(bucket.file(NAME).delete()).rejects.toMatchObject({ code: 404 });
    expect((await bucket.file(NAME, { generation: saved[0] }).download())[0].toString()).toBe('one');
  });

  it('refuses, under retention, the delete of any generation of the name', async () => {
    const { name, bucket } = newBucket();
    await bucket.file(NAME).save(Buffer.from('old'), { resumable: false });
    await bucket.file(NAME).save(Buffer.from('new'), { resumable: false });
    const before = await versions(bucket);
    server.retainObject(name, NAME, new Date(Date.now() + 3_600_000));
    const refused = { code: 403, errors: [expect.objectContaining({ reason: 'retentionPolicyNotMet' })] };
    await expect(bucket.file(NAME).delete()).rejects.toMatchObject(refused);
    for (const v of before) {
      await expect(bucket.file(NAME, { generation: v.generation }).delete()).rejects.toMatchObject(refused);
    }
    expect(await versions(bucket)).toEqual(before);
    expect((await bucket.file(NAME).download())[0].toString()).toBe('new');
  });

  it('pages a listing of versions with prefix, delimiter and maxResults, a page ending between generations', async () => {
    const { bucket } = newBucket();
    for (const name of ['v2/a', 'v2/b', 'v2/sub/c', 'v2/sub/d', 'other']) {
      for (const body of ['1', '2']) await bucket.file(name).save(Buffer.from(body), { resumable: false });
    }
    await bucket.file('v2/b').delete();
    const all = await versions(bucket, 'v2/');
    expect(all.map((v) => `${v.name}${v.noncurrent ? ' (noncurrent)' : ''}`)).toEqual([
      'v2/a (noncurrent)',
      'v2/a',
      'v2/b (noncurrent)',
      'v2/b (noncurrent)',
      'v2/sub/c (noncurrent)',
      'v2/sub/c',
      'v2/sub/d (noncurrent)',
      'v2/sub/d',
    ]);
    for (let i = 1; i < all.length; i++) {
      if (all[i].name === all[i - 1].name)
        expect(Number(all[i].generation)).toBeGreaterThan(Number(all[i - 1].generation));
    }

    const pages: string[][] = [];
    let prefixes: string[] = [];
    let query: ListQuery | null = { versions: true, prefix: 'v2/', delimiter: '/', maxResults: 3, autoPaginate: false };
    while (query) {
      const [files, next, response]: [GcsFile[], ListQuery | null, { prefixes?: string[] }] =
        await bucket.getFiles(query);
      pages.push(files.map((f) => `${f.name}#${f.metadata.generation}`));
      prefixes = [...prefixes, ...(response.prefixes ?? [])];
      query = next;
    }
    const gen = (i: number) => `${all[i].name}#${all[i].generation}`;
    // The first page ends between v2/b's generations; the common prefix counts towards a page's maxResults.
    expect(pages).toEqual([[gen(0), gen(1), gen(2)], [gen(3)]]);
    expect(prefixes).toEqual(['v2/sub/']);
  });
});

it('an unversioned bucket keeps no noncurrent generations: an overwrite replaces, a delete removes', async () => {
  const { bucket } = newBucket(false);
  await bucket.file(NAME).save(Buffer.from('old'), { resumable: false });
  const old = await generationOf(bucket.file(NAME));
  await bucket.file(NAME).save(Buffer.from('new'), { resumable: false });
  const current = await generationOf(bucket.file(NAME));
  expect(await versions(bucket)).toEqual([{ name: NAME, generation: current, noncurrent: false }]);
  await expect(bucket.file(NAME, { generation: old }).download()).rejects.toMatchObject({ code: 404 });
  expect((await bucket.file(NAME, { generation: current }).download())[0].toString()).toBe('new');
  await bucket.file(NAME).delete();
  expect(await versions(bucket)).toEqual([]);
});

it('serves a noncurrent generation to a plain media download, whole or a range, with its generation and hashes', async () => {
  const { name, bucket } = newBucket();
  const body = randomBytes(5000);
  await bucket.file(NAME).save(body, { resumable: false });
  const generation = await generationOf(bucket.file(NAME));
  await bucket.file(NAME).save(Buffer.from('replacement'), { resumable: false });
  const url = (g: string) =>
    `${server.endpoint}/storage/v1/b/${name}/o/${encodeURIComponent(NAME)}?alt=media&generation=${g}`;

  const whole = await fetch(url(generation));
  expect(whole.status).toBe(200);
  expect(whole.headers.get('x-goog-generation')).toBe(generation);
  expect(whole.headers.get('x-goog-hash')).toMatch(/^crc32c=[^,]+,md5=.+$/);
  expect(Buffer.from(await whole.arrayBuffer()).equals(body)).toBe(true);

  const range = await fetch(url(generation), { headers: { range: 'bytes=100-199' } });
  expect(range.status).toBe(206);
  expect(range.headers.get('content-range')).toBe('bytes 100-199/5000');
  expect(Buffer.from(await range.arrayBuffer()).equals(body.subarray(100, 200))).toBe(true);

  const missing = await fetch(url(String(Number(generation) - 1)));
  expect(missing.status).toBe(404);
  expect(await missing.json()).toMatchObject({ error: { code: 404, errors: [{ reason: 'notFound' }] } });
});
