import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, copyFile, cp, mkdir, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import {
  ENCRYPTION_MAGIC,
  EncryptedStore,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  METADATA_DECOMPRESSED_SIZE,
  METADATA_ENCRYPTION_KEY_ID,
  parseKeyFile,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { buildChainStore, type ChainStore, startCluster, type TestCluster, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import { errorMessages as errors, programJson, runProgram } from './run-program.js';
import { firstDelta, keyspaceOnceStored, type SidecarProcess, startSidecar, startWriter } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/** The first bytes of each snapshot of a file:// store, by name. */
async function heads(storeDir: string): Promise<Map<string, Buffer>> {
  const found = new Map<string, Buffer>();
  for (const name of (await readdir(join(storeDir, 'v2'))).sort()) {
    const file = await open(join(storeDir, 'v2', name));
    try {
      const head = Buffer.alloc(16);
      await file.read(head, 0, 16, 0);
      found.set(name, head);
    } finally {
      await file.close();
    }
  }
  return found;
}

const encrypted = (head: Buffer) => head.subarray(0, 8).equals(ENCRYPTION_MAGIC);
/** The key id an encrypted object's header names (docs/encryption.md §1). */
const keyIdOf = (head: Buffer) => head.subarray(10, 10 + head[9]).toString('utf8');

describe('client-side encryption through the programs (real etcd, processes)', () => {
  const at = tempDir('encryption-');
  const k1 = randomBytes(32).toString('hex');
  const k2 = randomBytes(32).toString('hex');
  let cluster: TestCluster;
  let source: KeyspaceFingerprint;
  let keys: string;
  const store = () => `file://${at('store')}`;

  beforeAll(async () => {
    cluster = await startCluster();
    keys = at('keys');
    await writeFile(keys, `# rotated: k1 encrypts\nk1 ${k1}\n`, { mode: 0o400 });
    await writeFile(at('keys-2'), `k2 ${k2}\n`, { mode: 0o400 });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('a plain full snapshot from before encryption was turned on, then the sidecar with a key: its deltas are encrypted, the mixed chain restores exactly with the key only, and compacts into an encrypted full', async () => {
    const client = cluster.client();
    await writeWorkload(client, { keys: 2_000, valueSize: 100 });
    const saved = await runProgram('etcd-snapshot', ['save', '--endpoints', cluster.endpoints[0], '--store', store()]);
    expect(saved.code, saved.stderr).toBe(0);
    let sidecar: SidecarProcess | undefined;
    try {
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: store(),
        dir: at('sidecar'),
        args: ['--encryption-key-file', keys],
      });
      const writer = startWriter(client, { concurrency: 8 });
      await firstDelta(sidecar.url);
      await writer.stop();
      source = await keyspaceOnceStored(client, sidecar.url);
      expect(await sidecar.stop()).toBe(0);
      expect(await sidecar.log()).not.toContain(k1);
    } finally {
      await sidecar?.kill();
    }

    const objects = await heads(at('store'));
    const fulls = [...objects].filter(([name]) => name.startsWith('Full-'));
    const deltas = [...objects].filter(([name]) => name.startsWith('Incr-'));
    expect(fulls.map(([, head]) => encrypted(head))).toEqual([false]);
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.every(([, head]) => encrypted(head) && keyIdOf(head) === 'k1')).toBe(true);
    // Each delta records its decompressed size, the most a restore decompresses it to.
    const local = new LocalStore(at('store'));
    for (const [name] of deltas) {
      expect((await local.stat(`v2/${name}`))?.metadata[METADATA_DECOMPRESSED_SIZE]).toMatch(/^[1-9]\d*$/);
    }

    const { result, fingerprint } = await restoreAndFingerprint(store(), at(), 'mixed', [
      '--encryption-key-file',
      keys,
    ]);
    expect(result.deltas.length).toBe(deltas.length);
    expect(fingerprint).toEqual(source);

    const keyless = await runProgram('etcd-restore', ['--store', store(), '--data-dir', at('keyless'), '--name', 'r0']);
    expect(keyless.code).toBe(1);
    expect(errors(keyless.stderr)).toMatch(/v2\/Incr-\S+ is encrypted with key "k1": give --encryption-key-file/);
    expect(existsSync(at('keyless'))).toBe(false);

    // Compaction reads the mixed chain and stores the full snapshot it folds it into, encrypted.
    const compacted = await runProgram('etcd-compact', [
      ...['--store', store(), '--work-dir', at(), '--encryption-key-file', keys, '--output', 'json'],
    ]);
    expect(compacted.code, compacted.stderr).toBe(0);
    const folded = [...(await heads(at('store')))].filter(([name]) => name.startsWith('Full-'));
    expect(folded.map(([, head]) => encrypted(head) && keyIdOf(head))).toEqual([false, 'k1']);
  });

  it('save encrypts a full snapshot; a copy re-encrypts every snapshot with a new key, which alone then reads them; list and gc need none', async () => {
    const saved = await runProgram('etcd-snapshot', [
      ...['save', '--endpoints', cluster.endpoints[0], '--store', store(), '--encryption-key-file', keys],
    ]);
    expect(saved.code, saved.stderr).toBe(0);
    const newest = [...(await heads(at('store')))].filter(([name]) => name.startsWith('Full-')).at(-1)!;
    expect(keyIdOf(newest[1])).toBe('k1');

    const copy = `file://${at('copy')}`;
    const copied = await runProgram('etcd-copy-backups', [
      ...['--from', store(), '--to', copy, '--source-encryption-key-file', keys],
      ...['--encryption-key-file', at('keys-2'), '--output', 'json'],
    ]);
    expect(copied.code, copied.stderr).toBe(0);
    expect(`${copied.stdout}${copied.stderr}`).not.toContain(k1);
    const copies = await heads(at('copy'));
    expect(copies.size).toBe((await heads(at('store'))).size);
    expect([...copies.values()].every((head) => encrypted(head) && keyIdOf(head) === 'k2')).toBe(true);

    const verified = await runProgram('etcd-copy-backups', [
      ...['verify', '--store', copy, '--encryption-key-file', at('keys-2')],
    ]);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    const oldKey = await runProgram('etcd-copy-backups', ['verify', '--store', copy, '--encryption-key-file', keys]);
    expect(oldKey.code).toBe(1);
    expect(errors(oldKey.stderr)).toMatch(/is encrypted with key "k2", which \S+keys does not hold/);

    const { fingerprint } = await restoreAndFingerprint(copy, at(), 'copied', ['--encryption-key-file', at('keys-2')]);
    expect(fingerprint).toEqual(source);

    // list and gc need no key: gc keeps the newest full it cannot verify, and deletes what the rule does not keep.
    const listed = await runProgram('etcd-snapshot', ['list', '--store', copy, '--output', 'json']);
    expect(JSON.parse(listed.stdout)).toHaveLength(copies.size);
    const gc = await runProgram('etcd-gc', ['--store', copy, '--keep-last', '1', '--lock-settle', '1s']);
    expect(gc.code, gc.stderr).toBe(0);
    expect(gc.stderr).toMatch(/Full-\S+ is kept unverified: .* is encrypted with key/);
    const kept = [...(await heads(at('copy'))).keys()];
    expect(kept).toContain(newest[0]);
    expect(kept.length).toBeLessThan(copies.size);
  });

  it('an encrypted snapshot moved to another name is refused by verify and restore, naming both names', async () => {
    // The first chain (a plain full and encrypted deltas) and the compacted full after it, one delta and that full
    // swapped: each file now holds the other's object, sound and under the right key, but not under its name.
    const names = [...(await heads(at('store')))];
    const compacted = names.find(([name, head]) => name.startsWith('Full-') && encrypted(head))![0];
    const delta = names.find(([name]) => name.startsWith('Incr-'))![0];
    const dir = at('swapped');
    await mkdir(join(dir, 'v2'), { recursive: true });
    for (const [name] of names.filter(([name]) => name.startsWith('Incr-') || name <= compacted)) {
      await copyFile(join(at('store'), 'v2', name), join(dir, 'v2', name));
    }
    await copyFile(join(at('store'), 'v2', compacted), join(dir, 'v2', delta));
    await copyFile(join(at('store'), 'v2', delta), join(dir, 'v2', compacted));
    const swapped = `file://${dir}`;

    const verified = await runProgram('etcd-copy-backups', [
      ...['verify', '--store', swapped, '--encryption-key-file', keys, '--output', 'json'],
    ]);
    expect(verified.code, verified.stderr).toBe(3);
    const damaged = JSON.parse(verified.stdout).damaged as Array<{ name: string; problem: string }>;
    expect(damaged.map((d) => [d.name, d.problem]).sort()).toEqual([
      [
        `v2/${compacted}`,
        expect.stringContaining(`v2/${compacted} was encrypted as v2/${delta}: it was moved or swapped`),
      ],
      [`v2/${delta}`, expect.stringContaining(`v2/${delta} was encrypted as v2/${compacted}: it was moved or swapped`)],
    ]);

    const restored = await runProgram('etcd-restore', [
      ...['--store', swapped, '--data-dir', at('swapped-data'), '--name', 'r0', '--encryption-key-file', keys],
    ]);
    expect(restored.code).toBe(1);
    expect(errors(restored.stderr)).toContain(`v2/${delta} was encrypted as v2/${compacted}: it was moved or swapped`);
    expect(existsSync(at('swapped-data'))).toBe(false);
  });

  it('etcd-validate bootstrap restores an empty data dir from the encrypted store with the key', async () => {
    const peer = `http://127.0.0.1:${await freePort()}`;
    const dataDir = at('bootstrap', 'data');
    await mkdir(dataDir, { recursive: true });
    const res = await runProgram(
      'etcd-validate',
      [
        ...['bootstrap', '--data-dir', dataDir, '--store', store(), '--encryption-key-file', keys, '--output', 'json'],
        ...['--name', 'm0', '--initial-cluster', `m0=${peer}`, '--initial-advertise-peer-urls', peer],
      ],
      { POD_NAMESPACE: '' },
    );
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ action: 'restore', restored: { revision: source.revision } });
  });

  it('refuses a malformed key file, or one others may read, with exit 2 before any work, never naming the key', async () => {
    const bad = at('bad-keys');
    await writeFile(bad, `k1 ${k1}\nk3 ${k2.slice(2)}\n`, { mode: 0o600 });
    const before = await readdir(join(at('store'), 'v2'));
    const res = await runProgram('etcd-snapshot', [
      ...['save', '--endpoints', cluster.endpoints[0], '--store', store(), '--encryption-key-file', bad],
    ]);
    expect(res.code).toBe(2);
    expect(errors(res.stderr)).toMatch(/bad-keys line 2: key "k3" is not 32 bytes/);
    expect(res.stderr).not.toContain(k2.slice(2));
    expect(await readdir(join(at('store'), 'v2'))).toEqual(before);
    const missing = await runProgram('etcd-gc', ['--store', store(), '--encryption-key-file', at('nope')]);
    expect(missing.code).toBe(2);
    expect(errors(missing.stderr)).toMatch(/cannot read the encryption key file \S+nope/);
    expect(await readFile(bad, 'utf8')).toContain('k3');

    // a key file others may read, as ssh refuses a private key
    const open = at('open-keys');
    await writeFile(open, `k1 ${k1}\n`);
    await chmod(open, 0o644);
    const refused = await runProgram('etcd-snapshot', [
      ...['save', '--endpoints', cluster.endpoints[0], '--store', store(), '--encryption-key-file', open],
    ]);
    expect(refused.code).toBe(2);
    expect(errors(refused.stderr)).toBe(
      `the encryption key file ${open} has mode 0644: others may read it or group or others may change it; make it its owner's alone: chmod 600 ${open}`,
    );
    expect(await readdir(join(at('store'), 'v2'))).toEqual(before);
  });
});

/**
 * A store the way the sidecar fills it with a key (two encrypted fulls and their deltas), and what damage or someone
 * who can write to the bucket does to it: each copy of it is restored with the key, exactly or not at all.
 */
describe('damage and substitutes in an encrypted store (real etcd, processes)', () => {
  const at = tempDir('encryption-damage-');
  let cluster: TestCluster;
  let chain: ChainStore;
  let keys: string;
  /** The keyspace at the chain's last revision, and at the newer full's. */
  let source: KeyspaceFingerprint;
  let atNewerFull: KeyspaceFingerprint;
  const origin = () => at('origin');
  /** A copy of the store to damage, as a file:// URL beside its folder. */
  const copyOf = async (name: string) => {
    await cp(origin(), at(name), { recursive: true });
    return { dir: at(name), url: `file://${at(name)}` };
  };
  const older = () => chain.fulls[0].name;
  const newer = () => chain.fulls[1].name;

  beforeAll(async () => {
    cluster = await startCluster();
    keys = at('keys');
    await writeFile(keys, `k1 ${randomBytes(32).toString('hex')}\n`, { mode: 0o400 });
    const client = cluster.client();
    const store = new EncryptedStore(new LocalStore(origin()), parseKeyFile(await readFile(keys, 'utf8'), keys));
    chain = await buildChainStore(client, cluster.endpoints, store, { tempDir: at(), keys: 600, compression: 'zstd' });
    source = await keyspaceFingerprint(client, chain.lastRevision);
    atNewerFull = await keyspaceFingerprint(client, chain.fulls[1].revision);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("a changed byte in the newer full's header (its wrapped data key) is damage: restore falls back to the older full exactly, and gc with the key keeps the older full", async () => {
    const { dir, url } = await copyOf('header');
    const path = join(dir, newer());
    const bytes = await readFile(path);
    // magic, version, key id length, key id, chunk size, nonce prefix, the wrap's nonce: then the wrapped key
    bytes[10 + bytes[9] + 4 + 7 + 12 + 5] ^= 0x01;
    await writeFile(path, bytes);

    const { result, fingerprint } = await restoreAndFingerprint(url, at(), 'header-restored', [
      '--encryption-key-file',
      keys,
    ]);
    expect(result.snapshot).toContain(older());
    expect(fingerprint).toEqual(source);

    // Without the key, gc cannot tell: it keeps the newer full unverified, and its JSON warnings say so.
    const keyless = await runProgram('etcd-gc', [
      ...['--store', url, '--keep-last', '1', '--dry-run', '--output', 'json'],
    ]);
    expect(keyless.code, keyless.stderr).toBe(0);
    const unverified = JSON.parse(keyless.stdout);
    expect(unverified.restorableFull).toBe(newer());
    expect(unverified.warnings).toEqual([
      expect.stringMatching(
        new RegExp(`^${newer()} is kept unverified: \\S+ is encrypted with key "k1": give --encryption-key-file`),
      ),
    ]);

    // With it, the newer full does not verify, so the older one starts the newest restorable chain and stays.
    const report = await programJson('etcd-gc', [
      ...['--store', url, '--keep-last', '1', '--lock-settle', '1s', '--encryption-key-file', keys],
    ]);
    expect(report.restorableFull).toBe(older());
    expect(report.warnings).toEqual([
      expect.stringContaining(
        `${newer()} does not verify, so it cannot start the newest chain: ${url}/${newer()} is damaged: its encryption header does not authenticate with key "k1"`,
      ),
    ]);
    expect(existsSync(join(dir, older()))).toBe(true);
    const after = await restoreAndFingerprint(url, at(), 'header-after-gc', ['--encryption-key-file', keys]);
    expect(after.fingerprint).toEqual(source);
  });

  it('a plain full put in place of the newest encrypted one, same name and revision, is not restored from with the key: the older encrypted full is', async () => {
    // Someone who can write to the bucket, with a db of their own at the newer full's revision.
    const other = await startCluster();
    try {
      const client = other.client();
      for (let i = 1; i < chain.fulls[1].revision; i++) await client.put(`/planted/${i}`).value('theirs');
      const planted = new LocalStore(at('planted'));
      const saved = await takeFullSnapshot({
        connection: { endpoints: other.endpoints },
        store: planted,
        compression: 'zstd',
        tempDir: at(),
      });
      expect(saved.revision).toBe(chain.fulls[1].revision);
      const { dir, url } = await copyOf('substituted');
      // only the chain up to the newer full: both fulls then reach the same revision
      for (const delta of chain.deltas.filter((d) => d.lastRevision > chain.fulls[1].revision)) {
        await rm(join(dir, delta.name));
      }
      const target = new LocalStore(dir);
      await target.put(newer(), await planted.get(saved.ref.name), {
        metadata: (await planted.stat(saved.ref.name))?.metadata,
      });

      const { result, fingerprint } = await restoreAndFingerprint(url, at(), 'substituted-restored', [
        '--encryption-key-file',
        keys,
      ]);
      expect(result.snapshot).toContain(older());
      expect(fingerprint).toEqual(atNewerFull);
      const verify = await runProgram('etcd-copy-backups', [
        ...['verify', '--store', url, '--encryption-key-file', keys, '--output', 'json'],
      ]);
      expect(JSON.parse(verify.stdout).damaged).toEqual([
        {
          name: newer(),
          problem: expect.stringContaining(
            `${url}/${newer()} is not encrypted, but the store holds an encrypted snapshot from before it (${older()})`,
          ),
        },
      ]);
    } finally {
      await other.stop();
    }
  });

  it('a store migrated in place, plain fulls and deltas then encrypted deltas, restores exactly with the key from either full', async () => {
    const { dir, url } = await copyOf('migrated');
    // Everything up to the newer full as it was before encryption was turned on: decrypted, metadata without key id.
    const plain = new LocalStore(dir);
    const decrypting = new EncryptedStore(plain, parseKeyFile(await readFile(keys, 'utf8'), keys));
    const before = [
      older(),
      ...chain.deltas.filter((d) => d.lastRevision <= chain.fulls[1].revision).map((d) => d.name),
      newer(),
    ];
    for (const name of before) {
      const { [METADATA_ENCRYPTION_KEY_ID]: _, ...metadata } = (await plain.stat(name))?.metadata ?? {};
      const body = await buffer(await decrypting.get(name));
      await plain.put(name, Readable.from([body]), { metadata });
    }
    const heads = await Promise.all(
      [...before, ...chain.deltas.map((d) => d.name)].map(
        async (name) => [name, (await readFile(join(dir, name))).subarray(0, 8).equals(ENCRYPTION_MAGIC)] as const,
      ),
    );
    expect(heads.filter(([, encrypted]) => encrypted).length).toBe(
      chain.deltas.filter((d) => d.lastRevision > chain.fulls[1].revision).length,
    );

    const newest = await restoreAndFingerprint(url, at(), 'migrated-newest', ['--encryption-key-file', keys]);
    expect(newest.result.snapshot).toContain(newer());
    expect(newest.fingerprint).toEqual(source);
    const fromOlder = await restoreAndFingerprint(url, at(), 'migrated-older', [
      ...['--encryption-key-file', keys, '--snapshot', older()],
    ]);
    expect(fromOlder.result.deltas.length).toBe(chain.deltas.length);
    expect(fromOlder.fingerprint).toEqual(source);
  });
});
