import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { LocalStore, listSnapshots, openStore, type SnapStore, snapshotName } from '@etcd-steward/core';
import { buildChainStore, startCluster, storeDeltas, syntheticEvents } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram, startProgram } from './run-program.js';
import { startFaultProxy } from './servers/fault-proxy.js';
import { type S3TestServer, startS3Server, writeS3Credentials } from './servers/s3-server.js';
import { waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('compact-faults-');

describe('etcd-compact on a small chain: bad usage, failures, a final chain', () => {
  let storeUrl: string;
  let store: LocalStore;
  let before: string[];

  beforeAll(async () => {
    const cluster = await startCluster();
    try {
      store = new LocalStore(at('store'));
      storeUrl = `file://${at('store')}`;
      await buildChainStore(cluster.client(), cluster.endpoints, store, { tempDir: at(), keys: 600 });
    } finally {
      await cluster.stop();
    }
    before = (await listSnapshots(store)).map((e) => e.name);
  });

  it.each([
    [['--etcd-snapshot-timeout', '0'], /--etcd-snapshot-timeout "0" must be above zero, e.g. 30m/],
    [['--etcd-defrag-timeout', '10'], /--etcd-defrag-timeout "10" is not a duration/],
    [['--compression', 'lz4'], /compression.*lz4/],
    [['--max-fetchers', '0'], /--max-fetchers "0" must be a whole number from 1 to 64/],
    [['--temp-dir', '/nonexistent/compact'], /--temp-dir \/nonexistent\/compact does not exist/],
    [['--etcd-bin-dir', '/nonexistent'], /no etcd binary in --etcd-bin-dir \/nonexistent/],
    [['--defragment=maybe'], /defragment/],
    [['--lock-ttl', '10s'], /--lock-ttl must be at least 30s/],
  ])('%s: exit 2 with the fix named, before any work', async (args, message) => {
    const res = await runProgram('etcd-compact', ['--store', storeUrl, ...args]);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(res.stderr).msg).toMatch(message);
    expect((await listSnapshots(store)).map((e) => e.name)).toEqual(before);
  });

  it('without --store: exit 2', async () => {
    const res = await runProgram('etcd-compact', []);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/store/);
  });

  it('refuses a chain with a missing delta (exit 1, nothing stored)', async () => {
    const gapped = await copyOfStore('gapped');
    const deltas = (await listSnapshots(gapped)).filter((e) => e.kind === 'Incr');
    await gapped.delete(deltas[deltas.length - 2].name);
    const names = (await listSnapshots(gapped)).map((e) => e.name);
    const res = await runProgram('etcd-compact', ['--store', `file://${at('gapped')}`, '--work-dir', at()]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/revisions \d+\.\.\d+ are in no delta .*nothing was stored/);
    expect((await listSnapshots(gapped)).map((e) => e.name)).toEqual(names);
  });

  it('newest full snapshot damaged, the chain before it missing a delta: exit 1, advice that etcd-compact takes', async () => {
    const store = await copyOfStore('fallback-gapped');
    const entries = await listSnapshots(store);
    const [older, newest] = entries.filter((e) => e.kind === 'Full');
    await store.delete(entries.find((e) => e.kind === 'Incr' && e.startRevision === older.lastRevision + 1)!.name);
    const db = gunzipSync(Buffer.concat(await (await store.get(newest.name)).toArray()));
    db[Math.floor(db.length / 2)] ^= 0x10;
    await store.put(newest.name, Readable.from([gzipSync(db)]));
    const names = (await listSnapshots(store)).map((e) => e.name);
    const res = await runProgram('etcd-compact', ['--store', `file://${at('fallback-gapped')}`, '--work-dir', at()]);
    expect(res.code).toBe(1);
    const message = JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg;
    expect(message).toMatch(/newer full snapshots failed verification.*are in no delta.*Take a full snapshot/);
    expect(message).not.toMatch(/--allow-partial/);
    expect((await listSnapshots(store)).map((e) => e.name)).toEqual(names);
  });

  it('folds a chain that ends with a final snapshot into a final full snapshot, with --compression gzip', async () => {
    const copy = await copyOfStore('final');
    const last = (await listSnapshots(copy)).filter((e) => e.kind === 'Incr').at(-1)!;
    await copy.put(snapshotName({ ...last, final: true }), await copy.get(last.name));
    await copy.delete(last.name);
    const args = ['--store', `file://${at('final')}`, '--work-dir', at(), '--output', 'json'];
    const plan = await runProgram('etcd-compact', [...args, '--dry-run']);
    expect(JSON.parse(plan.stdout)).toMatchObject({ final: true, revision: last.lastRevision });
    const res = await runProgram('etcd-compact', [...args, '--compression', 'gzip']);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ final: true, revision: last.lastRevision });
    expect(JSON.parse(res.stdout).name).toMatch(
      new RegExp(`^v2/Full-00000000-0*${last.lastRevision}-\\d+\\.gz\\.final$`),
    );
  });

  it('refuses to run beside another compaction of the same store: the store lock is taken (exit 1)', async () => {
    await copyOfStore('concurrent');
    const work = at('work-concurrent');
    await mkdir(work);
    const args = ['--store', `file://${at('concurrent')}`, '--work-dir', work];
    const first = startProgram('etcd-compact', args);
    const exited = new Promise<number | null>((resolve) => first.once('exit', resolve));
    await insideTheLock(work);
    first.kill('SIGSTOP'); // stalled inside the lock, so that the second run cannot come after it
    const second = await runProgram('etcd-compact', args).finally(() => first.kill('SIGCONT'));
    expect(second.code).toBe(1);
    expect(JSON.parse(second.stderr.trim().split('\n').at(-1)!).msg).toMatch(LOCKED_BY_COMPACTION);
    expect(await exited).toBe(0);
    expect(await readdir(work)).toEqual([]);
    expect(await lockRecord(at('concurrent'))).toBeUndefined(); // released at the end
  });

  it('fails at once, exit 1, when gc holds the store lock: the holder named, nothing touched', async () => {
    const locked = await copyOfStore('held');
    const names = (await listSnapshots(locked)).map((e) => e.name);
    const record = {
      token: 'e'.repeat(32),
      holder: 'gc-host:7',
      purpose: 'etcd-gc',
      expiresAt: new Date(Date.now() + 600_000).toISOString(),
    };
    await mkdir(at('held', 'locks'));
    await writeFile(at('held', 'locks', 'maintenance.json'), JSON.stringify(record));
    const work = at('work-held');
    await mkdir(work);
    const res = await runProgram('etcd-compact', ['--store', `file://${at('held')}`, '--work-dir', work]);
    expect(res.code).toBe(1);
    expect(JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg).toMatch(
      /is locked by gc-host:7 \(etcd-gc\) until .+: another gc or compaction runs; try again later/,
    );
    expect((await listSnapshots(locked)).map((e) => e.name)).toEqual(names);
    expect(await lockRecord(at('held'))).toEqual(record);
    expect(await readdir(work)).toEqual([]);
  });

  it('beside gc: gc is refused while the compaction holds the lock; both done, the store restores the chain', async () => {
    const both = await copyOfStore('with-gc');
    const url = `file://${at('with-gc')}`;
    const chainEnd = (await listSnapshots(both)).at(-1)!.lastRevision;
    const work = at('work-with-gc');
    await mkdir(work);
    const gc = () => runProgram('etcd-gc', ['--store', url, '--keep-last', '1', '--lock-settle', '2s']);
    const compaction = startProgram('etcd-compact', ['--store', url, '--work-dir', work, '--output', 'json']);
    let stdout = '';
    compaction.stdout?.on('data', (d) => (stdout += d));
    const exited = new Promise<number | null>((resolve) => compaction.once('exit', resolve));
    await insideTheLock(work);
    compaction.kill('SIGSTOP'); // stalled inside the lock, so that gc cannot come after it
    const refused = await gc().finally(() => compaction.kill('SIGCONT'));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(LOCKED_BY_COMPACTION);
    expect(await exited).toBe(0);
    const compacted = JSON.parse(stdout).name;
    const removed = await gc();
    expect(removed.code, removed.stderr).toBe(0);
    // gc kept the compacted full alone: it is the newest chain
    expect((await listSnapshots(both)).map((e) => e.name)).toEqual([compacted]);
    const restored = await restoreAndFingerprint(url, at(), 'after-gc');
    const fromChain = await restoreAndFingerprint(storeUrl, at(), 'chain');
    expect(restored.result).toMatchObject({ revision: chainEnd, snapshot: compacted, deltas: [] });
    expect(restored.fingerprint).toEqual(fromChain.fingerprint);
  });

  it('stopped by SIGTERM while it works: exit 1, scratch folder removed with what ran in it, nothing stored, lock released', async () => {
    const work = at('work-stopped');
    await mkdir(work);
    const child = startProgram('etcd-compact', ['--store', storeUrl, '--work-dir', work]);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await insideTheLock(work);
    child.kill('SIGTERM');
    expect(await exited).toBe(1);
    expect(await readdir(work)).toEqual([]);
    expect((await listSnapshots(store)).map((e) => e.name)).toEqual(before);
    expect(await lockRecord(at('store'))).toBeUndefined();
  });

  it('killed mid-replay, its lock seen from another host: the lock holds until it expires; then the next run clears the scratch folder and compacts', async () => {
    const url = `file://${at('killed')}`;
    await longChain('killed');
    const names = (await listSnapshots(new LocalStore(at('killed')))).map((e) => e.name);
    const work = at('work-killed');
    await mkdir(work);
    const child = startProgram('etcd-compact', ['--store', url, '--work-dir', work]);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await replaying(work);
    child.kill('SIGKILL'); // as a node lost would leave it: the replay thread ends with its process
    await exited;
    expect((await listSnapshots(new LocalStore(at('killed')))).map((e) => e.name)).toEqual(names);
    // on this host the next run would see the holder gone and take its lock at once (gc.test.ts)
    await rewriteLock(new LocalStore(at('killed')), { scope: 'another-node/boot/pid:[1]' });
    const refused = await runProgram('etcd-compact', ['--store', url, '--work-dir', work]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(LOCKED_BY_COMPACTION);
    expect(await readdir(work)).not.toEqual([]); // the scratch folder is the lock holder's
    await expireLock(new LocalStore(at('killed'))); // as --lock-ttl after the holder died

    const res = await runProgram('etcd-compact', ['--store', url, '--work-dir', work, '--output', 'json']);
    expect(res.code, res.stderr).toBe(0);
    expect(await readdir(work)).toEqual([]);
    const after = (await listSnapshots(new LocalStore(at('killed')))).map((e) => e.name);
    expect(after.filter((n) => !names.includes(n))).toEqual([JSON.parse(res.stdout).name]);
  });
});

const LOCKED_BY_COMPACTION =
  /is locked by .+ \(etcd-compact\) until .+: another gc or compaction runs; try again later/;

/** The store lock in a local store, as stored. */
async function lockRecord(dir: string): Promise<unknown> {
  const text = await readFile(join(dir, 'locks', 'maintenance.json'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : JSON.parse(text);
}

/** What time does to the lock of a holder that died: it expires. */
function expireLock(store: SnapStore): Promise<void> {
  return rewriteLock(store, { expiresAt: new Date(Date.now() - 1000).toISOString() });
}

async function rewriteLock(store: SnapStore, change: object): Promise<void> {
  let text = '';
  for await (const chunk of await store.get('locks/maintenance.json')) text += chunk;
  const changed = { ...JSON.parse(text), ...change };
  await store.put('locks/maintenance.json', Readable.from([Buffer.from(JSON.stringify(changed))]));
}

/** A copy of the test's store, to change without disturbing the other tests. */
async function copyOfStore(name: string): Promise<LocalStore> {
  const source = new LocalStore(at('store'));
  const copy = new LocalStore(at(name));
  for (const e of await listSnapshots(source)) await copy.put(e.name, await source.get(e.name));
  return copy;
}

/** Once a compaction working in `work` holds the store lock: it made its scratch folder, which it does then. */
function insideTheLock(work: string): Promise<string> {
  return waitFor(
    'the compaction to hold the store lock',
    async () => {
      const [scratch] = await readdir(work);
      return scratch && (await readFile(join(work, scratch, 'owner'), 'utf8').catch(() => '')) ? scratch : undefined;
    },
    120_000,
  );
}

/** Once a compaction working in `work` replays its chain: its restore has a delta's file in its scratch folder. */
async function replaying(work: string): Promise<void> {
  const scratch = await insideTheLock(work);
  const deltas = join(work, scratch, '.data.restoring', 'replay', 'deltas');
  await waitFor(
    'the replay',
    async () => ((await readdir(deltas).catch(() => [])).length > 0 ? true : undefined),
    120_000,
  );
}

/** A copy of the test's store with 30,000 made-up revisions more in two deltas: a replay that lasts seconds. */
async function longChain(name: string): Promise<void> {
  const copy = await copyOfStore(name);
  const from = (await listSnapshots(copy)).at(-1)!.lastRevision + 1;
  const events = syntheticEvents({ startRevision: from, revisions: 30_000 });
  await storeDeltas(copy, events, { startRevision: from, cuts: [from + 15_000], compression: 'gzip' });
}

describe('etcd-compact killed at the upload', () => {
  let server: S3TestServer;
  const env: NodeJS.ProcessEnv = { AWS_EC2_METADATA_DISABLED: 'true' };

  beforeAll(async () => {
    server = await startS3Server({ buckets: ['backups'] });
    const credentials = at('credentials.json');
    await writeS3Credentials(credentials, server);
    env.AWS_APPLICATION_CREDENTIALS_JSON = credentials;
    Object.assign(process.env, env); // for this test's own store client
  });
  afterAll(() => server?.stop());

  it('leaves the store as it was; the next run clears what it left and compacts', async () => {
    const url = (endpoint: string) => `s3://backups/etcd?endpoint=${encodeURIComponent(endpoint)}`;
    const store = await openStore(url(server.endpoint));
    const cluster = await startCluster();
    try {
      await buildChainStore(cluster.client(), cluster.endpoints, store, { tempDir: at(), keys: 600 });
    } finally {
      await cluster.stop();
    }
    const before = (await listSnapshots(store)).map((e) => e.name);
    // Once the compaction runs, uploads (PUT, and POST to begin a multipart one) hang in the proxy; reads pass.
    // Before, the lock's writes go through.
    const proxy = await startFaultProxy({
      target: server.endpoint,
      failureRate: 0,
      faults: ['hang'],
      methods: ['PUT', 'POST'],
    });
    const work = at('work');
    await mkdir(work);
    try {
      const child = startProgram('etcd-compact', ['--store', url(proxy.endpoint), '--work-dir', work], env);
      let stderr = '';
      child.stderr?.on('data', (d) => (stderr += d));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      // Once the lock is held, only the upload writes to the store (and the lock's renewal, a third of --lock-ttl
      // later): the compaction and the snapshot's check take moments, so waiting for them would race the upload.
      await waitFor('the restore', async () => /"msg":"restoring the chain to fold"/.test(stderr), 120_000);
      proxy.failureRate = 1;
      await waitFor('the upload to begin', async () => proxy.stats.faults.hang > 0, 120_000).catch((err) => {
        throw new Error(`${err.message}: ${stderr}`);
      });
      expect(stderr).toMatch(/"msg":"storing the compacted snapshot"/);
      child.kill('SIGKILL');
      await exited;
    } finally {
      await proxy.stop();
    }
    expect((await listSnapshots(store)).map((e) => e.name)).toEqual(before);
    expect(server.pendingUploads('backups')).toEqual([]);
    expect((await readdir(work)).filter((f) => f.startsWith('etcd-compact-'))).toHaveLength(1);
    await expireLock(store); // the killed run's, as --lock-ttl after it died

    const res = await runProgram(
      'etcd-compact',
      ['--store', url(server.endpoint), '--work-dir', work, '--output', 'json'],
      env,
    );
    expect(res.code, res.stderr).toBe(0);
    const after = (await listSnapshots(store)).map((e) => e.name);
    expect(after.filter((n) => !before.includes(n))).toEqual([JSON.parse(res.stdout).name]);
    expect(await readdir(work)).toEqual([]);
    await rm(work, { recursive: true, force: true });
  }, 300_000); // a chain built, a compaction killed and a second one: past 2 minutes under load
});
