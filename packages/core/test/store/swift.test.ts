/**
 * The Swift store against a real OpenStack Swift (one per file: it takes seconds to start): the conformance suite
 * over auth v1, Keystone v3 logins as ebr makes them, and large objects laid out as ebr lays them out.
 */
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type SnapStore, UsageError } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KeystoneServer, startKeystone } from '../../../../test/servers/keystone-server.js';
import { describeConformance } from './conformance.js';
import { FAST_RETRIES } from './s3-target.js';
import { bodyOf, randomData, readAll } from './streams.js';
import { SWIFT_PART_SIZE, type SwiftTarget, startSwiftTarget } from './swift-target.js';

let shared: Promise<SwiftTarget> | undefined;
const target = () => {
  shared ??= startSwiftTarget();
  return shared;
};
afterAll(async () => {
  await (await shared)?.stop();
});

describeConformance('Swift', async () => {
  const t = await target();
  return {
    open: (prefix) => t.open(prefix),
    partSize: SWIFT_PART_SIZE,
    pendingUploads: async () => (await t.strandedSegments()).length,
    stop: async () => {},
  };
});

describe('Keystone v3 logins, with credentials as ebr reads them', () => {
  let swift: SwiftTarget;
  let keystone: KeystoneServer;
  let dir: string;
  beforeAll(async () => {
    swift = await target();
    keystone = await startKeystone({
      swift: swift.server,
      users: [
        { name: 'etcd-backup', domain: 'Default', password: 'pass-word', project: { name: 'etcd', domain: 'Default' } },
      ],
      applicationCredentials: [{ id: 'ac-0123', name: 'backups', secret: 'ac-secret', user: 'etcd-backup' }],
    });
    dir = await mkdtemp(join(tmpdir(), 'keystone-'));
  });
  afterAll(async () => {
    await keystone?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A directory of one-value files, as a mounted Secret; values end with a newline, as `kubectl create` leaves them. */
  const secretDir = async (name: string, values: Record<string, string>) => {
    const path = join(dir, name);
    await mkdir(path, { recursive: true });
    for (const [k, v] of Object.entries(values)) await writeFile(join(path, k), `${v}\n`);
    return path;
  };
  const password = () => ({
    authURL: keystone.authUrl,
    domainName: 'Default',
    tenantName: 'etcd',
    username: 'etcd-backup',
    password: 'pass-word',
    region: keystone.region,
  });
  const roundTrip = async (store: SnapStore, name: string) => {
    const data = randomData(SWIFT_PART_SIZE + 777);
    await store.put(name, bodyOf(data));
    expect((await readAll(await store.get(name))).equals(data)).toBe(true);
    await store.close?.();
  };
  const open = (prefix: string, env: NodeJS.ProcessEnv, query = '') =>
    openStore(`swift://${swift.container}/${prefix}${query}`, { retry: FAST_RETRIES, env });

  it('logs in with a password from a directory of files, and with an application credential from a JSON file', async () => {
    const before = { ...keystone.logins };
    const files = await secretDir('password', password());
    await roundTrip(await open('keystone-password', { OPENSTACK_APPLICATION_CREDENTIALS: files }), 'v2/a');
    const json = join(dir, 'app-credential.json');
    await writeFile(
      json,
      JSON.stringify({
        authURL: keystone.authUrl,
        domainName: 'Default',
        tenantName: 'etcd',
        applicationCredentialID: 'ac-0123',
        applicationCredentialName: 'backups',
        applicationCredentialSecret: 'ac-secret',
        region: keystone.region,
      }),
    );
    await roundTrip(await open('keystone-ac', { OPENSTACK_APPLICATION_CREDENTIALS_JSON: json }), 'v2/b');
    expect(keystone.logins.password).toBeGreaterThan(before.password);
    expect(keystone.logins.application_credential).toBeGreaterThan(before.application_credential);
  });

  it("logs in from OpenStack's OS_* variables when there are no files", async () => {
    const env = {
      OS_AUTH_URL: keystone.authUrl,
      OS_USERNAME: 'etcd-backup',
      OS_PASSWORD: 'pass-word',
      OS_PROJECT_NAME: 'etcd',
      OS_USER_DOMAIN_NAME: 'Default',
      OS_PROJECT_DOMAIN_NAME: 'Default',
      OS_REGION_NAME: keystone.region,
    };
    await roundTrip(await open('keystone-env', env), 'v2/c');
  });

  it('logs in again when Swift refuses a token (401), and goes on', async () => {
    const files = await secretDir('stale', password());
    const before = keystone.logins.password;
    keystone.staleTokens(1);
    const store = await open('keystone-stale', { OPENSTACK_APPLICATION_CREDENTIALS: files }, '?retries=0');
    await roundTrip(store, 'v2/d');
    expect(keystone.logins.password - before).toBe(2);
  });

  it('uses a rotated password from the next request on, with no restart', async () => {
    const files = await secretDir('rotating', password());
    const rewrite = async (value: string, secondsAhead: number) => {
      const file = join(files, 'password');
      await writeFile(file, value);
      const when = new Date(Date.now() + secondsAhead * 1000);
      await utimes(file, when, when);
    };
    const store = await open('keystone-rotation', { OPENSTACK_APPLICATION_CREDENTIALS: files }, '?retries=0');
    await store.put('v2/a', bodyOf(Buffer.from('a')));
    await rewrite('revoked', 2);
    await expect(store.put('v2/b', bodyOf(Buffer.from('b')))).rejects.toThrow(/credentials were refused \(401\)/);
    await rewrite('pass-word', 3);
    await store.put('v2/c', bodyOf(Buffer.from('c')));
    expect((await store.list()).map((o) => o.name)).toEqual(['v2/a', 'v2/c']);
    await store.close?.();
  });

  it('refuses a wrong password, a missing field and an ambiguous region with exit 2, printing no secret', async () => {
    const refused = async (env: NodeJS.ProcessEnv, query = '') => {
      const err = await open('refused', env, query).then(
        () => new Error('opened'),
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(UsageError);
      expect(err.message).not.toMatch(/pass-word|wrong-word|ac-secret/);
      return err.message;
    };
    const wrong = await secretDir('wrong', { ...password(), password: 'wrong-word' });
    expect(await refused({ OPENSTACK_APPLICATION_CREDENTIALS: wrong })).toMatch(
      /swift:\/\/backups\/refused: open container "backups": the credentials were refused \(401\): check OPENSTACK_APPLICATION_CREDENTIALS/,
    );
    const { domainName: _, ...noDomain } = password();
    const partial = await secretDir('no-domain', noDomain);
    expect(await refused({ OPENSTACK_APPLICATION_CREDENTIALS: partial })).toMatch(/needs domainName/);
    const { region: __, ...noRegion } = password();
    const anyRegion = await secretDir('no-region', noRegion);
    expect(await refused({ OPENSTACK_APPLICATION_CREDENTIALS: anyRegion })).toMatch(
      /object-store endpoints in several regions \(RegionOne, RegionOne-other\)/,
    );
    // The region chosen in the URL wins over the files'.
    expect(await refused({ OPENSTACK_APPLICATION_CREDENTIALS: anyRegion }, '?region=Nowhere')).toMatch(
      /no object-store endpoint in region "Nowhere"; it has: RegionOne, RegionOne-other/,
    );
    const both = await secretDir('both', { ...password(), applicationCredentialSecret: 'ac-secret' });
    expect(await refused({ OPENSTACK_APPLICATION_CREDENTIALS: both })).toMatch(
      /both a password and an application credential/,
    );
  });
});

describe("large objects as ebr lays them out (segments under the object's name)", () => {
  let swift: SwiftTarget;
  let store: SnapStore;
  /** A raw request to the account, as ebr's client makes them. */
  let raw: (
    method: string,
    path: string,
    init?: { headers?: Record<string, string>; body?: Buffer },
  ) => Promise<Response>;
  const prefix = 'ebr-layout/etcd-main';
  beforeAll(async () => {
    swift = await target();
    store = await swift.open(prefix);
    const { storageUrl, token } = await swift.server.token();
    raw = (method, path, init = {}) =>
      fetch(`${storageUrl}/${swift.container}/${path}`, {
        method,
        headers: { 'x-auth-token': token, ...init.headers },
        body: init.body as BodyInit | undefined,
      });
  });
  afterAll(async () => {
    await store?.close?.();
  });

  it("reads ebr's dynamic large object whole, lists it with its size and not its segments, and deletes both", async () => {
    const full = 'v2/Full-00000000-00000042-1700000000.gz';
    const segments = [randomData(3000), randomData(3000), randomData(1234)];
    for (const [i, data] of segments.entries()) {
      const res = await raw('PUT', `${prefix}/${full}/${String(i + 1).padStart(10, '0')}`, { body: data });
      expect(res.status).toBe(201);
    }
    // ebr's manifest: empty, naming container/prefix/v2/<name> (no trailing slash) as the segments' prefix.
    const manifest = await raw('PUT', `${prefix}/${full}`, {
      headers: { 'x-object-manifest': `${swift.container}/${prefix}/${full}` },
      body: Buffer.alloc(0),
    });
    expect(manifest.status).toBe(201);
    const delta = 'v2/Incr-00000043-00000050-1700000060.gz';
    await raw('PUT', `${prefix}/${delta}`, { body: Buffer.from('a delta') });

    const whole = Buffer.concat(segments);
    expect((await readAll(await store.get(full))).equals(whole)).toBe(true);
    expect((await readAll(await store.get(full, { offset: 5000 }))).equals(whole.subarray(5000))).toBe(true);
    expect((await store.list()).map((o) => [o.name, o.size])).toEqual([
      [full, whole.length],
      [delta, 7],
    ]);
    await store.delete(full);
    expect((await swift.server.listAll(swift.container, `${prefix}/`)).map((o) => o.name)).toEqual([
      `${prefix}/${delta}`,
    ]);
  });

  it('writes a static large object whose segments ebr takes for chunks of it, reads back whole with a plain GET, and is gone when ebr deletes it', async () => {
    const full = 'v2/Full-00000000-00000099-1700000100.gz';
    const data = randomData(SWIFT_PART_SIZE * 2 + 4321);
    await store.put(full, bodyOf(data), { metadata: { sha256: 'f'.repeat(64) } });
    const keys = (await swift.server.listAll(swift.container, `${prefix}/${full}`)).map((o) => o.name);
    const parts = keys.filter((k) => k !== `${prefix}/${full}`);
    expect(parts).toHaveLength(3);
    // ebr's rule: below v2/, a name with one more part is a chunk of the snapshot named by the first; the part after
    // the slash holds no "-", so ebr's name parser takes the whole as the snapshot's name and a chunk of it.
    for (const part of parts) expect(part).toMatch(new RegExp(`^${prefix}/${full}/[0-9a-z]+\\.\\d{10}$`));
    const plain = await raw('GET', `${prefix}/${full}`);
    expect(Buffer.from(await plain.arrayBuffer()).equals(data)).toBe(true);
    expect(plain.headers.get('x-static-large-object')).toBe('True');
    // ebr deletes a snapshot's chunks, then the snapshot.
    for (const key of [...parts, `${prefix}/${full}`]) expect((await raw('DELETE', key)).status).toBe(204);
    expect(await store.stat(full)).toBeUndefined();
    expect((await store.list()).map((o) => o.name)).not.toContain(full);
  });

  it('a second put of a name never touches the segments of the first, and leaves none of them behind', async () => {
    const name = 'v2/Full-00000000-00000100-1700000200.gz';
    const first = randomData(SWIFT_PART_SIZE * 2 + 10);
    await store.put(name, bodyOf(first));
    const reading = await store.get(name);
    const second = randomData(SWIFT_PART_SIZE + 20);
    await store.put(name, bodyOf(second));
    // The old segments went once the new manifest was in: a read begun before may break off, never mix objects.
    await readAll(reading).catch(() => undefined);
    expect((await readAll(await store.get(name))).equals(second)).toBe(true);
    const under = (await swift.server.listAll(swift.container, `${prefix}/${name}/`)).map((o) => o.name);
    expect(under).toHaveLength(2);
    await store.put(name, bodyOf(Buffer.from('small now')));
    expect(await swift.server.listAll(swift.container, `${prefix}/${name}/`)).toEqual([]);
    expect((await store.list()).find((o) => o.name === name)?.size).toBe(9);
  });
});
