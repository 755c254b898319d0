import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, cp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  listSnapshots,
  type SnapStore,
} from '@etcd-steward/core';
import { buildChainStore, type ChainStore, fingerprintRestored, startCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type AzureTarget, startAzureTarget } from '../packages/core/test/store/azure-target.js';
import { type GcsTarget, startGcsTarget } from '../packages/core/test/store/gcs-target.js';
import { type S3Target, startS3Target } from '../packages/core/test/store/s3-target.js';
import { ebrStoreDir } from './fixtures.js';
import { runProgram, startProgram } from './run-program.js';
import { startFaultProxy } from './servers/fault-proxy.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('copy-backups-');

/** The names and sizes of a store's snapshots, to compare two stores. */
async function contents(store: SnapStore): Promise<string[]> {
  return (await listSnapshots(store)).map((e) => `${e.name} ${e.size}`);
}

/** A tar file's entries, read from their ustar headers: name, where the data starts and its size. */
function tarEntries(tar: Buffer): { name: string; dataStart: number; size: number }[] {
  const entries: { name: string; dataStart: number; size: number }[] = [];
  for (let at = 0; at + 512 <= tar.length && tar[at] !== 0; ) {
    const field = (from: number, length: number) =>
      tar
        .subarray(at + from, at + from + length)
        .toString('latin1')
        .replace(/\0.*$/s, '');
    const prefix = field(345, 155);
    const name = prefix ? `${prefix}/${field(0, 100)}` : field(0, 100);
    const size = Number.parseInt(field(124, 12).trim(), 8);
    entries.push({ name, dataStart: at + 512, size });
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}

describe('etcd-copy-backups (programs as processes, real etcd, the store test servers)', () => {
  let chain: ChainStore;
  let source: KeyspaceFingerprint;
  let s3: S3Target;
  let gcs: GcsTarget;
  let azure: AzureTarget;

  beforeAll(async () => {
    const cluster = await startCluster();
    try {
      [s3, gcs, azure] = await Promise.all([startS3Target(), startGcsTarget(), startAzureTarget()]);
      const store = await s3.open('source');
      chain = await buildChainStore(cluster.client(), cluster.endpoints, store, { tempDir: at(), keys: 900 });
      source = await keyspaceFingerprint(cluster.client(), chain.lastRevision);
      await store.close?.();
    } finally {
      await cluster.stop();
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all([s3?.stop(), gcs?.stop(), azure?.stop()]);
  });

  async function copy(from: string, to: string, extra: string[] = []) {
    const res = await runProgram('etcd-copy-backups', ['--from', from, '--to', to, '--output', 'json', ...extra]);
    return { ...res, summary: res.code <= 1 && res.stdout ? JSON.parse(res.stdout) : undefined };
  }

  async function restoreFingerprint(
    storeUrl: string,
    name: string,
    extra: string[] = [],
  ): Promise<KeyspaceFingerprint> {
    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = at(name);
    const res = await runProgram('etcd-restore', [
      ...['--store', storeUrl, '--data-dir', dataDir, '--name', 'r0'],
      ...['--initial-advertise-peer-urls', peer, '--initial-cluster-token', name, '--output', 'json', ...extra],
    ]);
    expect(res.stderr).not.toMatch(/"level":"error"/);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout).revision).toBe(chain.lastRevision);
    const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort }], {
      initialCluster: `r0=${peer}`,
      clusterToken: name,
    });
    return fingerprint;
  }

  it('copies S3 → GCS → Azure → local, checked on the way; a restore from the last equals the source; a second run copies nothing', async () => {
    const hops = [s3.url('source'), gcs.url('copy'), azure.url('copy'), `file://${at('local')}`];
    const objects = chain.fulls.length + chain.deltas.length;
    for (let i = 1; i < hops.length; i++) {
      const { code, summary, stderr } = await copy(hops[i - 1], hops[i], ['--max-parallel', '3']);
      expect(stderr).not.toMatch(/"level":"error"/);
      expect(code).toBe(0);
      expect(summary).toMatchObject({ selected: objects, copied: objects, skipped: 0, damaged: [] });
      expect(stderr).toMatch(/"level":"progress","msg":"copy","objects":"\d+\/\d+"/);
    }
    const first = await s3.open('source');
    const last = new LocalStore(at('local'));
    expect(await contents(last)).toEqual(await contents(first));
    // our sha256 and db size travel with the objects
    const full = (await last.stat(chain.fulls[1].name))?.metadata;
    expect(full).toEqual((await first.stat(chain.fulls[1].name))?.metadata);
    expect(full?.sha256).toMatch(/^[0-9a-f]{64}$/);
    await first.close?.();
    expect(await restoreFingerprint(hops[3], 'restored-from-local')).toEqual(source);

    const again = await copy(hops[0], hops[1]);
    expect(again.code).toBe(0);
    expect(again.summary).toMatchObject({ selected: objects, copied: 0, skipped: objects, bytes: 0 });
  });

  it('copies only what the filters select, newest first', async () => {
    const to = `file://${at('newest-chain')}`;
    const { code, summary } = await copy(s3.url('source'), to, ['--newest-chain-only']);
    expect(code).toBe(0);
    const names = (await listSnapshots(new LocalStore(at('newest-chain')))).map((e) => e.name);
    expect(names).toEqual([chain.fulls[1].name, ...chain.deltas.slice(1).map((d) => d.name)]);
    expect(summary.copied).toBe(names.length);
    const since = await copy(s3.url('source'), `file://${at('since')}`, [
      '--since-revision',
      String(chain.lastRevision),
    ]);
    expect(since.code).toBe(0);
    expect((await listSnapshots(new LocalStore(at('since')))).map((e) => e.name)).toEqual([chain.deltas[2].name]);
    // ebr counts a backup as a full snapshot and the deltas up to the next: the newest one is the second full
    const one = await copy(s3.url('source'), `file://${at('one-backup')}`, ['--max-backups-to-copy', '1']);
    expect(one.code).toBe(0);
    expect((await listSnapshots(new LocalStore(at('one-backup')))).map((e) => e.name)).toEqual(names);
  });

  it('a copy killed midway (SIGKILL) leaves no partial object, the newest full snapshot first; run again it completes', async () => {
    // Every request to the destination waits, so that the copy is still running when it is killed.
    const proxy = await startFaultProxy({
      target: s3.server.endpoint,
      failureRate: 1,
      faults: ['stall'],
      stallMs: 250,
    });
    onTestFinished(() => proxy.stop());
    const to = s3.url('killed', { endpoint: proxy.endpoint });
    const destination = await s3.open('killed');
    onTestFinished(async () => destination.close?.());
    const child = startProgram('etcd-copy-backups', ['--from', s3.url('source'), '--to', to, '--max-parallel', '1']);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    for (;;) {
      const copied = (await destination.list('v2/')).length;
      if (copied >= 1) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    child.kill('SIGKILL');
    await exited;
    const sourceStore = await s3.open('source');
    onTestFinished(async () => sourceStore.close?.());
    const all = await contents(sourceStore);
    const landed = await contents(destination);
    expect(landed.length).toBeLessThan(all.length);
    for (const object of landed) expect(all).toContain(object); // whole objects only
    // the full snapshots go first, newest first: what a copy cut short holds restores on its own
    const fullsNewestFirst = [chain.fulls[1].name, chain.fulls[0].name];
    expect(landed.map((o) => o.split(' ')[0])).toEqual(fullsNewestFirst.slice(0, landed.length).sort());
    const rerun = await copy(s3.url('source'), s3.url('killed'));
    expect(rerun.code).toBe(0);
    expect(rerun.summary).toMatchObject({ skipped: landed.length, copied: all.length - landed.length });
    expect(await contents(destination)).toEqual(all);
  });

  it('a copy stopped with SIGTERM stops its uploads, exits 1 and leaves no partial object', async () => {
    const proxy = await startFaultProxy({
      target: s3.server.endpoint,
      failureRate: 1,
      faults: ['stall'],
      stallMs: 250,
    });
    onTestFinished(() => proxy.stop());
    const destination = await s3.open('terminated');
    onTestFinished(async () => destination.close?.());
    const child = startProgram('etcd-copy-backups', [
      ...['--from', s3.url('source'), '--to', s3.url('terminated', { endpoint: proxy.endpoint })],
      ...['--max-parallel', '1'],
    ]);
    let stderr = '';
    child.stderr?.on('data', (chunk) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // Stopped once one object has landed and the others are still to come, so that what it leaves is tested.
    while ((await destination.list('v2/')).length < 1) await new Promise((resolve) => setTimeout(resolve, 50));
    child.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(stderr).toMatch(/stopped by SIGTERM/);
    const sourceStore = await s3.open('source');
    onTestFinished(async () => sourceStore.close?.());
    const all = await contents(sourceStore);
    const landed = await contents(destination);
    expect(landed.length).toBeGreaterThanOrEqual(1);
    expect(landed.length).toBeLessThan(all.length);
    for (const object of landed) expect(all).toContain(object); // whole objects only
    expect(s3.server.pendingUploads('backups')).toEqual([]);
  });

  it('export to a tar file, import into an empty store, restore: the same keyspace; and through a pipe', async () => {
    const tar = at('backup.tar');
    const exported = await runProgram('etcd-copy-backups', [
      ...['export', '--from', s3.url('source'), '--to', tar, '--output', 'json'],
    ]);
    expect(exported.code).toBe(0);
    expect(JSON.parse(exported.stdout)).toMatchObject({ objects: 3, lastRevision: chain.lastRevision });
    expect((await readdir(at())).filter((f) => f.includes('.part'))).toEqual([]);
    const imported = await runProgram('etcd-copy-backups', [
      ...['import', '--from', tar, '--to', `file://${at('imported')}`, '--output', 'json'],
    ]);
    expect(imported.stderr).not.toMatch(/"level":"error"/);
    expect(imported.code).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ objects: 3, imported: 3, skipped: 0, damaged: [] });
    expect(await restoreFingerprint(`file://${at('imported')}`, 'restored-from-tar')).toEqual(source);

    // export --to - | import --from -
    const bin = (name: string) => join(import.meta.dirname, `../packages/copy-backups/bin/${name}.js`);
    const exporter = spawn(
      process.execPath,
      [bin('etcd-copy-backups'), 'export', '--from', s3.url('source'), '--to', '-'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const importer = spawn(
      process.execPath,
      [bin('etcd-copy-backups'), 'import', '--from', '-', '--to', gcs.url('piped'), '--output', 'json'],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    exporter.stdout.pipe(importer.stdin);
    let out = '';
    importer.stdout.on('data', (c) => {
      out += c;
    });
    const codes = await Promise.all(
      [exporter, importer].map((p) => new Promise<number | null>((resolve) => p.once('exit', resolve))),
    );
    expect(codes).toEqual([0, 0]);
    expect(JSON.parse(out)).toMatchObject({ imported: 3, damaged: [] });
    const piped = await gcs.open('piped');
    expect(await contents(piped)).toEqual(await contents(new LocalStore(at('imported'))));
    await piped.close?.();

    // a tar file cut in the middle of its last object stores every object before it, whole, and says so
    const bytes = await readFile(tar);
    const last = tarEntries(bytes).at(-1)!;
    await writeFile(at('truncated.tar'), bytes.subarray(0, last.dataStart + Math.floor(last.size / 2)));
    const truncated = await runProgram('etcd-copy-backups', [
      ...['import', '--from', at('truncated.tar'), '--to', `file://${at('from-truncated')}`],
    ]);
    expect(truncated.code).toBe(1);
    expect(truncated.stderr).toMatch(/truncated/);
    const whole = await contents(new LocalStore(at('imported')));
    const lastName = last.name.slice('objects/'.length);
    expect(whole.some((object) => object.startsWith(`${lastName} `))).toBe(true);
    expect(await contents(new LocalStore(at('from-truncated')))).toEqual(
      whole.filter((object) => !object.startsWith(`${lastName} `)),
    );
  });

  it('an import reports each object whose tar header is damaged and imports the others', async () => {
    const tar = at('headers.tar');
    expect((await runProgram('etcd-copy-backups', ['export', '--from', s3.url('source'), '--to', tar])).code).toBe(0);
    const bytes = await readFile(tar);
    const entries = tarEntries(bytes); // the manifest, then the three objects
    expect(entries).toHaveLength(4);
    // one byte of the first and of the last object's header name: their checksums no longer match
    for (const damaged of [entries[1], entries[3]]) bytes[damaged.dataStart - 512 + 20] ^= 0x01;
    await writeFile(at('damaged-headers.tar'), bytes);
    const res = await runProgram('etcd-copy-backups', [
      ...['import', '--from', at('damaged-headers.tar'), '--to', `file://${at('from-damaged-headers')}`],
      ...['--output', 'json'],
    ]);
    expect(res.code).toBe(1);
    const summary = JSON.parse(res.stdout);
    const name = (e: { name: string }) => e.name.slice('objects/'.length);
    expect(summary).toMatchObject({ objects: 3, imported: 1 });
    expect(summary.damaged.map((d: { name: string }) => d.name)).toEqual([name(entries[1]), name(entries[3])]);
    for (const d of summary.damaged) {
      expect(d.problem).toMatch(/its tar header is damaged \(its checksum does not match\)/);
    }
    expect((await contents(new LocalStore(at('from-damaged-headers')))).map((o) => o.split(' ')[0])).toEqual([
      name(entries[2]),
    ]);
  });

  it('exports and imports encrypted snapshots as stored beside plain ones, checked with the key or as stored bytes without; refuses a tampered byte and a wrong key', async () => {
    const keys = at('keys');
    await writeFile(keys, `k1 ${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
    const wrong = at('wrong-keys');
    await writeFile(wrong, `k1 ${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
    // A mixed store: the deltas encrypted, the full snapshot plain (written before encryption was turned on).
    const plain = at('export-plain');
    const mixed = at('export-mixed');
    expect((await copy(s3.url('source'), `file://${plain}`, ['--newest-chain-only'])).code).toBe(0);
    const encrypting = await copy(s3.url('source'), `file://${mixed}`, [
      '--newest-chain-only',
      '--encryption-key-file',
      keys,
    ]);
    expect(encrypting.code, encrypting.stderr).toBe(0);
    const full = chain.fulls.at(-1)!.name;
    await copyFile(join(plain, full), join(mixed, full));
    const deltas = chain.deltas.filter((d) => d.startRevision > chain.fulls.at(-1)!.revision).map((d) => d.name);
    expect(deltas.length).toBeGreaterThan(0);
    const exportTo = async (tar: string, extra: string[] = []) =>
      runProgram('etcd-copy-backups', [
        'export',
        '--from',
        `file://${mixed}`,
        '--to',
        tar,
        '--output',
        'json',
        ...extra,
      ]);
    const importInto = async (tar: string, store: string, extra: string[] = []) => {
      const res = await runProgram('etcd-copy-backups', [
        'import',
        '--from',
        tar,
        '--to',
        store,
        '--output',
        'json',
        ...extra,
      ]);
      return { ...res, summary: res.stdout ? JSON.parse(res.stdout) : undefined };
    };

    const withKey = await exportTo(at('mixed.tar'), ['--encryption-key-file', keys]);
    expect(withKey.code, withKey.stderr).toBe(0);
    expect(JSON.parse(withKey.stdout)).toMatchObject({ objects: 1 + deltas.length, storedBytesOnly: [] });
    const keyless = await runProgram('etcd-copy-backups', [
      'export',
      '--from',
      `file://${mixed}`,
      '--to',
      at('keyless.tar'),
    ]);
    expect(keyless.code, keyless.stderr).toBe(0);
    expect(keyless.stdout).toContain(`${deltas.length} encrypted snapshot(s) checked as stored bytes only`);
    for (const name of deltas) expect(keyless.stdout).toContain(`    ${name}\n`);

    // The tar holds the encrypted snapshots as stored, and no stretch of their plain (compressed) bytes.
    const tar = await readFile(at('keyless.tar'));
    const holds = (bytes: Buffer) => tar.indexOf(bytes) >= 0;
    expect(holds(await readFile(join(plain, full)))).toBe(true);
    for (const name of deltas) {
      expect(holds(await readFile(join(mixed, name)))).toBe(true);
      const clear = await readFile(join(plain, name));
      for (let at = 0; at + 64 <= clear.length; at += 997) expect(holds(clear.subarray(at, at + 64))).toBe(false);
    }

    // Without the key, imported as stored bytes; with it, checked through: both restore with the key.
    const asStored = await importInto(at('keyless.tar'), `file://${at('imported-keyless')}`);
    expect(asStored.code, asStored.stderr).toBe(0);
    expect(asStored.summary).toMatchObject({ imported: 1 + deltas.length, damaged: [], storedBytesOnly: deltas });
    for (const name of [full, ...deltas]) {
      expect((await readFile(join(at('imported-keyless'), name))).equals(await readFile(join(mixed, name)))).toBe(true);
    }
    // Names are relative to the store's prefix, as the name seal's: into another provider, under a prefix.
    const checked = await importInto(at('mixed.tar'), s3.url('from-tar/encrypted'), ['--encryption-key-file', keys]);
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.summary).toMatchObject({ imported: 1 + deltas.length, damaged: [], storedBytesOnly: [] });
    expect(
      await restoreFingerprint(`file://${at('imported-keyless')}`, 'from-keyless-tar', ['--encryption-key-file', keys]),
    ).toEqual(source);
    expect(
      await restoreFingerprint(s3.url('from-tar/encrypted'), 'from-encrypted-tar', ['--encryption-key-file', keys]),
    ).toEqual(source);

    // One byte of an encrypted delta changed in the tar: refused with the key (its tag) and without (the sha256).
    const tampered = Buffer.from(tar);
    const delta = await readFile(join(mixed, deltas[0]));
    tampered[tar.indexOf(delta) + Math.floor(delta.length / 2)] ^= 0x01;
    await writeFile(at('tampered.tar'), tampered);
    for (const [dir, extra, says] of [
      [at('tampered-keyless'), [], /do not match the sha256 the tar file's manifest records/],
      [at('tampered-key'), ['--encryption-key-file', keys], /encrypted chunk \d+ does not authenticate/],
    ] as const) {
      const res = await importInto(at('tampered.tar'), `file://${dir}`, [...extra]);
      expect(res.code).toBe(1);
      expect(res.summary.damaged.map((d: { name: string }) => d.name)).toEqual([deltas[0]]);
      expect(res.summary.damaged[0].problem).toMatch(says);
      expect(existsSync(join(dir, deltas[0]))).toBe(false);
      expect(existsSync(join(dir, full))).toBe(true);
    }

    // Another key under the right id: its header does not authenticate, exit 1, nothing written (no tar, no object).
    const wrongImport = await importInto(at('mixed.tar'), `file://${at('imported-wrong')}`, [
      '--encryption-key-file',
      wrong,
    ]);
    expect(wrongImport.code).toBe(1);
    expect(wrongImport.stderr).toMatch(
      /Incr-\S+ is damaged: its encryption header does not authenticate with key \\"k1\\" of \S+wrong-keys/,
    );
    expect(existsSync(at('imported-wrong'))).toBe(false);
    const wrongExport = await exportTo(at('wrong.tar'), ['--encryption-key-file', wrong]);
    expect(wrongExport.code).toBe(1);
    expect(wrongExport.stderr).toMatch(
      /Incr-\S+ is damaged: its encryption header does not authenticate with key \\"k1\\" of \S+wrong-keys/,
    );
    expect((await readdir(at())).filter((f) => f.startsWith('.wrong.tar') || f === 'wrong.tar')).toEqual([]);
  });

  it('verify names a bit-flipped object and a missing delta, with exit codes; copy reports a damaged source object and leaves it out', async () => {
    const dir = at('verify');
    const store = `file://${dir}`;
    expect((await copy(s3.url('source'), store)).code).toBe(0);
    const verify = () => runProgram('etcd-copy-backups', ['verify', '--store', store, '--output', 'json']);
    const sound = await verify();
    expect(sound.code).toBe(0);
    expect(JSON.parse(sound.stdout)).toMatchObject({ damaged: [], newestRevision: chain.lastRevision, exitCode: 0 });

    // one bit of the newest chain's middle delta flipped
    const flipped = chain.deltas[1];
    const path = join(dir, flipped.name);
    const original = await readFile(path);
    const damaged = Buffer.from(original);
    damaged[Math.floor(damaged.length / 2)] ^= 0x10;
    await writeFile(path, damaged);
    const bad = await verify();
    expect(bad.code).toBe(3);
    const report = JSON.parse(bad.stdout);
    expect(report.damaged.map((d: { name: string }) => d.name)).toEqual([flipped.name]);
    expect(report.restorable.revision).toBe(flipped.startRevision - 1);
    const text = await runProgram('etcd-copy-backups', ['verify', '--store', store]);
    expect(text.code).toBe(3);
    expect(text.stdout).toContain(`DAMAGED ${flipped.name}`);
    expect(text.stdout).toContain(`revisions ${flipped.startRevision}..${flipped.lastRevision} are in no sound delta`);

    // copy reports it by name and copies the rest
    const copied = await copy(store, `file://${at('from-damaged')}`);
    expect(copied.code).toBe(1);
    expect(copied.summary.damaged.map((d: { name: string }) => d.name)).toEqual([flipped.name]);
    expect(copied.summary.copied).toBe(chain.fulls.length + chain.deltas.length - 1);
    expect(await stat(join(at('from-damaged'), flipped.name)).catch(() => undefined)).toBeUndefined();

    // the delta missing instead
    await rm(path);
    const missing = await runProgram('etcd-copy-backups', ['verify', '--store', store]);
    expect(missing.code).toBe(3);
    expect(missing.stdout).toContain(
      `revisions ${flipped.startRevision}..${flipped.lastRevision} are in no sound delta`,
    );
    await writeFile(path, original);
    expect((await verify()).code).toBe(0);

    // a store ebr wrote (gzip and uncompressed, full snapshots named before their content) restores to its newest
    const ebr = await runProgram('etcd-copy-backups', [
      'verify',
      '--store',
      `file://${ebrStoreDir}`,
      '--output',
      'json',
    ]);
    expect(ebr.code).toBe(0);
    expect(JSON.parse(ebr.stdout)).toMatchObject({
      objects: 5,
      damaged: [],
      newestRevision: 9,
      restorable: { revision: 9 },
    });
  });

  it('checks a snapshot by its recorded sha256, one without by its content, and every content with --check content', async () => {
    const dir = at('digests');
    expect((await copy(s3.url('source'), `file://${dir}`)).code).toBe(0);
    const local = new LocalStore(dir);
    const all = chain.fulls.length + chain.deltas.length;
    const damage = async (name: string) => {
      const original = await readFile(join(dir, name));
      const damaged = Buffer.from(original);
      damaged[Math.floor(damaged.length / 2)] ^= 0x10;
      return { original, damaged, metadata: (await local.stat(name))?.metadata ?? {} };
    };
    const refusedAs = async (name: string, to: string, says: RegExp, extra: string[] = []) => {
      const res = await copy(`file://${dir}`, `file://${at(to)}`, extra);
      expect(res.code, to).toBe(1);
      expect(res.summary.damaged, to).toEqual([{ name, problem: expect.stringMatching(says) }]);
      expect(res.summary.copied, to).toBe(all - 1);
      expect(await stat(join(at(to), name)).catch(() => undefined), to).toBeUndefined();
    };
    const contentDamaged = /is damaged: (it does not decompress|its content does not match)/;

    // A full snapshot carries the sha256 recorded when it was stored: stored bytes that do not match it are refused.
    const full = chain.fulls[1].name;
    const f = await damage(full);
    expect(f.metadata.sha256).toMatch(/^[0-9a-f]{64}$/);
    await writeFile(join(dir, full), f.damaged);
    await refusedAs(full, 'bytes-changed', /its bytes do not match the sha256 recorded when it was stored/);

    // A damaged content under a sha256 recorded of it: that digest is the proof of what was stored, so it is copied
    // as stored; --check content decompresses it and refuses it.
    const digest = createHash('sha256').update(f.damaged).digest('hex');
    await local.put(full, Readable.from([f.damaged]), { metadata: { ...f.metadata, sha256: digest } });
    const trusted = await copy(`file://${dir}`, `file://${at('digest-trusted')}`);
    expect(trusted.code).toBe(0);
    // between two local stores, what its sha256 proves is copied by the kernel, the rest streamed and checked
    expect(trusted.summary).toMatchObject({
      copied: all,
      damaged: [],
      ways: { kernel: chain.fulls.length, streamed: chain.deltas.length },
    });
    expect((await readFile(join(at('digest-trusted'), full))).equals(f.damaged)).toBe(true);
    await refusedAs(full, 'content-checked', contentDamaged, ['--check', 'content']);
    await local.put(full, Readable.from([f.original]), { metadata: f.metadata });

    // A delta without a recorded sha256 (as ebr stores them): its content is decompressed and checked.
    const delta = chain.deltas[1].name;
    const d = await damage(delta);
    expect(d.metadata.sha256).toBeUndefined();
    await writeFile(join(dir, delta), d.damaged);
    await refusedAs(delta, 'no-digest', contentDamaged);
    await writeFile(join(dir, delta), d.original);

    // The sound store copies whole either way.
    const sound = await copy(`file://${dir}`, `file://${at('sound-content')}`, ['--check', 'content']);
    expect(sound.code).toBe(0);
    expect(sound.summary).toMatchObject({ copied: all, damaged: [], ways: { kernel: 0, streamed: all } });
  });

  it('between two buckets of one S3 endpoint the server copies what a recorded sha256 proves, by the checksum S3 computes of the copy; a damaged one is refused, nothing left of it', async () => {
    s3.server.createBucket('mirror');
    const all = chain.fulls.length + chain.deltas.length;
    const read = () => s3.server.gets(s3.bucket);
    const before = read();
    const res = await copy(s3.url('source'), s3.url('copy', {}, 'mirror'));
    expect(res.stderr).not.toMatch(/"level":"error"/);
    expect(res.code).toBe(0);
    const ways = { kernel: 0, server: chain.fulls.length, streamed: chain.deltas.length };
    expect(res.summary).toMatchObject({ copied: all, damaged: [], ways });
    // the full snapshots' bytes never came to the program: not one GET of them
    const after = read();
    for (const full of chain.fulls) expect(after.get(`source/${full.name}`)).toBe(before.get(`source/${full.name}`));
    const [source, mirror] = [await s3.open('source'), await s3.open('copy', {}, 'mirror')];
    onTestFinished(async () => {
      await Promise.all([source.close?.(), mirror.close?.()]);
    });
    expect(await contents(mirror)).toEqual(await contents(source));
    const full = chain.fulls[1].name;
    expect((await mirror.stat(full))?.metadata).toEqual((await source.stat(full))?.metadata);
    const bytes = async (store: SnapStore, name: string) => Buffer.concat(await (await store.get(name)).toArray());
    expect((await bytes(mirror, full)).equals(await bytes(source, full))).toBe(true);

    // A full snapshot whose stored bytes changed under its recorded sha256: S3's checksum of the copy tells, the
    // upload is aborted, and nothing of it lands.
    const original = await bytes(mirror, full);
    const damaged = Buffer.from(original);
    damaged[damaged.length >> 1] ^= 0x10;
    await mirror.put(full, Readable.from([damaged]), { metadata: (await mirror.stat(full))?.metadata });
    const refused = await copy(s3.url('copy', {}, 'mirror'), s3.url('refused'));
    expect(refused.code).toBe(1);
    expect(refused.summary.damaged).toEqual([
      { name: full, problem: expect.stringMatching(/its bytes do not match the sha256 recorded when it was stored/) },
    ]);
    expect(refused.summary.ways).toEqual({ ...ways, server: ways.server - 1 });
    const landed = await s3.open('refused');
    onTestFinished(async () => landed.close?.());
    expect(await landed.stat(full)).toBeUndefined();
    expect(s3.server.pendingUploads(s3.bucket)).toEqual([]);

    // A server that answers a part copy without a checksum cannot prove it, and one without part copies cannot make
    // it: every object is streamed and checked, and nothing is left of the uploads the copy began.
    const credentials = process.env.AWS_APPLICATION_CREDENTIALS_JSON;
    onTestFinished(() => {
      process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
    });
    for (const server of [{ copyChecksums: false }, { partCopies: false }]) {
      const plain = await startS3Target('plain', { ...server, buckets: ['other'] });
      onTestFinished(() => plain.stop());
      const fill = await runProgram('etcd-copy-backups', ['--from', s3.url('source'), '--to', plain.url('source')], {
        SOURCE_AWS_APPLICATION_CREDENTIALS_JSON: credentials,
      });
      expect(fill.code).toBe(0);
      const streamed = await copy(plain.url('source'), plain.url('copy', {}, 'other'));
      expect(streamed.code, JSON.stringify(server)).toBe(0);
      expect(streamed.summary).toMatchObject({ copied: all, ways: { kernel: 0, server: 0, streamed: all } });
      expect(plain.server.pendingUploads('other')).toEqual([]);
    }
  });

  it('refuses bad flags with exit code 2 before any work, touching nothing', async () => {
    const untouched = at('untouched');
    const cases: Array<[string[], RegExp]> = [
      [['--from', s3.url('source')], /give --to/],
      [['--from', 'file:///tmp/x', '--to', 'file:///tmp/x'], /same store/],
      [['--from', 'nope', '--to', `file://${untouched}`], /--from .*nope.* is not a URL/],
      [['--from', s3.url('source'), '--to', `file://${untouched}`, '--max-parallel', '0'], /--max-parallel 0/],
      [['--from', s3.url('source'), '--to', `file://${untouched}`, '--max-backup-age', '-5'], /--max-backup-age -5/],
      [
        ['--from', s3.url('source'), '--to', `file://${untouched}`, '--wait-for-final-snapshot-timeout', '5'],
        /not a duration/,
      ],
      [['--from', s3.url('source'), '--to', `file://${untouched}`, '--max-paralel', '2'], /max-paralel/],
      [['--from', s3.url('source'), '--to', `file://${untouched}`, '--check', 'bytes'], /check/],
      [['export', '--from', s3.url('source'), '--to', at('no-such-dir', 'x.tar')], /does not exist/],
      [['import', '--from', at('no-such.tar'), '--to', `file://${untouched}`], /is not a file/],
      [['verify'], /store/],
    ];
    for (const [args, message] of cases) {
      const res = await runProgram('etcd-copy-backups', args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr, args.join(' ')).toMatch(message);
    }
    expect(await stat(untouched).catch(() => undefined)).toBeUndefined();
  });

  it("reads the source's credentials from ebr's SOURCE_ variables, so two accounts of one provider can be used", async () => {
    const wrong = at('wrong-credentials.json');
    await writeFile(
      wrong,
      JSON.stringify({ accessKeyID: 'nobody', secretAccessKey: 'nothing', region: s3.server.region }),
    );
    const args = ['--from', s3.url('source'), '--to', `file://${at('other-account')}`, '--newest-chain-only'];
    const refused = await runProgram('etcd-copy-backups', args, { AWS_APPLICATION_CREDENTIALS_JSON: wrong });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/s3:\/\/backups\/source/);
    expect(refused.stderr).not.toContain('nothing');
    const res = await runProgram('etcd-copy-backups', args, {
      AWS_APPLICATION_CREDENTIALS_JSON: wrong,
      SOURCE_AWS_APPLICATION_CREDENTIALS_JSON: s3.credentialsFile,
    });
    expect(res.stderr).not.toMatch(/"level":"error"/);
    expect(res.code).toBe(0);
  });

  it('copies between one bucket and prefix on two S3 servers: ?endpoint= names another store', async () => {
    // startS3Target points the default credentials at its own server: the first server's stay the source's
    const credentials = process.env.AWS_APPLICATION_CREDENTIALS_JSON;
    const other = await startS3Target();
    process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
    try {
      const env = {
        AWS_APPLICATION_CREDENTIALS_JSON: other.credentialsFile,
        SOURCE_AWS_APPLICATION_CREDENTIALS_JSON: s3.credentialsFile,
      };
      const res = await runProgram(
        'etcd-copy-backups',
        ['--from', s3.url('source'), '--to', other.url('source'), '--newest-chain-only', '--output', 'json'],
        env,
      );
      expect(res.stderr).not.toMatch(/same store/);
      expect(res.code).toBe(0);
      process.env.AWS_APPLICATION_CREDENTIALS_JSON = other.credentialsFile;
      const copied = await listSnapshots(await other.open('source')).finally(() => {
        process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
      });
      expect(copied.length).toBeGreaterThan(0);
      // the same server spelled with a trailing slash is still the same store
      const again = await runProgram(
        'etcd-copy-backups',
        ['--from', s3.url('source'), '--to', s3.url('source', { endpoint: `${s3.server.endpoint}/` })],
        env,
      );
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(/same store/);
    } finally {
      await other.stop();
    }
  });

  it('waits for a final full snapshot as ebr does, and copies what there is after the timeout', async () => {
    const res = await copy(s3.url('source'), `file://${at('after-wait')}`, [
      ...['--wait-for-final-snapshot', '--wait-for-final-snapshot-timeout', '1s', '--newest-chain-only'],
    ]);
    expect(res.code).toBe(0);
    expect(res.summary.finalSnapshot).toBe('timed out');
    expect(res.stderr).toMatch(/no final full snapshot before the timeout/);
  });
});

describe('etcd-copy-backups between two spellings of one store', () => {
  it('refuses them as the same store (exit 2), as it refuses one URL given twice, and copies nothing', async () => {
    const store = at('one-store');
    await cp(ebrStoreDir, store, { recursive: true });
    await symlink(store, at('one-store-link'));
    const before = await readdir(store, { recursive: true });
    for (const to of [
      `file://${store}/`,
      `file://${store}//`,
      `file://localhost${store}`,
      `file://${store}/../one-store`,
      `file://${at('one-store-link')}`,
    ]) {
      const res = await runProgram('etcd-copy-backups', ['--from', `file://${store}`, '--to', to]);
      expect(res.code, to).toBe(2);
      expect(JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg, to).toMatch(
        /^--from and --to are the same store \(.*\): give another destination$/,
      );
    }
    const res = await runProgram('etcd-copy-backups', ['--from', 's3://backups/etcd', '--to', 's3://backups/etcd/']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/same store/);
    expect(await readdir(store, { recursive: true })).toEqual(before);
  });
});
