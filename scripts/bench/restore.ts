// etcd-restore against `etcdctl snapshot restore` of the full snapshot alone, and against ebr's restore when
// EBR_BIN names its etcdbrctl: a ~130 MB base (100,000 keys) plus 200,000 delta revisions written to a real
// etcd, side by side: wall time and peak RSS of each process tree. Targets (issue #5): at most 0.5x ebr's time
// (ebr measured 39 s here) and 0.5x its peak RSS (593 MB), and under 256 MB.
//
// Usage: node scripts/bench/restore.ts [--keys 100000] [--events 200000] [--value-size 900]
//          [--delta-value-size 900] [--deltas 10] [--replay direct,grpc] [--keep DIR]
// A quick run: node scripts/bench/restore.ts --keys 10000 --events 20000
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { createGunzip } from 'node:zlib';
import { freePort, keyspaceFingerprint, LocalStore, takeFullSnapshot } from '@etcd-steward/core';
import { fingerprintRestored, startCluster, storeDeltas, watchEvents } from '@etcd-steward/core/testing';
import type { Etcd3 } from 'etcd3';
import { measure, printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    events: { type: 'string', default: '200000' },
    'value-size': { type: 'string', default: '900' },
    'delta-value-size': { type: 'string', default: '900' },
    deltas: { type: 'string', default: '10' },
    replay: { type: 'string', default: 'direct' },
    keep: { type: 'string' },
  },
});
const keys = Number(values.keys);
const events = Number(values.events);
const valueSize = Number(values['value-size']);
const deltaValueSize = Number(values['delta-value-size']);
const root = new URL('../..', import.meta.url).pathname;
const work = values.keep ?? (await mkdtemp(join(tmpdir(), 'bench-restore-')));
await mkdir(work, { recursive: true });
const storeDir = join(work, 'store');

/** Kubernetes-like values: a JSON head and a random (incompressible) tail. */
function value(i: number, size: number): Buffer {
  const head = JSON.stringify({ kind: 'ConfigMap', name: `cm-${i}`, labels: { app: `app-${i % 50}` } });
  return Buffer.concat([Buffer.from(head), randomBytes(Math.max(0, size - head.length))]).subarray(0, size);
}
const keyOf = (i: number) => Buffer.from(`/registry/configmaps/ns-${i % 100}/cm-${i}`);

async function runConcurrently(count: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await op(next++);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** The base in txns of 100 puts; then `events` revisions: updates, creates, deletes, multi-key txns and leased keys. */
async function buildStore(client: Etcd3, endpoints: string[]): Promise<{ base: number; last: number }> {
  console.log(`loading ${keys} keys of ${valueSize} B…`);
  await runConcurrently(Math.ceil(keys / 100), 8, (b) =>
    client.kv.txn({
      compare: [],
      success: Array.from({ length: Math.min(100, keys - b * 100) }, (_, j) => ({
        request_put: { key: keyOf(b * 100 + j), value: value(b * 100 + j, valueSize) },
      })),
      failure: [],
    }),
  );
  const store = new LocalStore(storeDir);
  const full = await takeFullSnapshot({ connection: { endpoints }, store, compression: 'gzip', tempDir: work });
  console.log(
    `full snapshot at revision ${full.revision}: ${(full.dbSize / 1e6).toFixed(0)} MB db, ${(full.storedSize / 1e6).toFixed(0)} MB stored`,
  );

  console.log(`writing ${events} delta revisions…`);
  const lease = await client.lease(3600, { autoKeepAlive: false }).grant();
  let created = keys;
  await runConcurrently(events, 32, async (n) => {
    const roll = n % 20;
    if (roll < 16)
      return client
        .put(keyOf((n * 7919) % keys))
        .value(value(n, deltaValueSize))
        .exec();
    if (roll === 16) return client.put(keyOf(created++)).value(value(n, deltaValueSize)).exec();
    if (roll === 17)
      return client
        .delete()
        .key(keyOf((n * 104729) % keys))
        .exec();
    if (roll === 18)
      return client
        .put(`/registry/leases/kube-system/l-${n % 500}`)
        .value(value(n, 64))
        .lease(lease)
        .exec();
    return client.kv.txn({
      compare: [],
      success: [0, 1, 2].map((j) => ({
        request_put: { key: keyOf((n * 31 + j) % keys), value: value(n + j, deltaValueSize) },
      })),
      failure: [],
    });
  });
  const last = Number((await client.kv.range({ key: Buffer.from([0]) })).header.revision);
  const cuts = Array.from(
    { length: Number(values.deltas) - 1 },
    (_, i) => full.revision + 1 + Math.round(((i + 1) * (last - full.revision)) / Number(values.deltas)),
  );
  let stored = 0;
  for (let from = full.revision + 1, i = 0; from <= last; i++) {
    // A slice of the watch at a time, so the benchmark's own memory stays small too.
    const to = i < cuts.length ? cuts[i] - 1 : last;
    const slice = await watchEvents(client, from, to);
    for (const d of await storeDeltas(store, slice, { startRevision: from, compression: 'gzip' }))
      stored += (await stat(join(storeDir, d.name))).size;
    from = to + 1;
  }
  console.log(
    `${last - full.revision} revisions in ${values.deltas} deltas (${(stored / 1e6).toFixed(0)} MB stored), newest revision ${last}`,
  );
  return { base: full.revision, last };
}

const cluster = await startCluster();
const rows: string[][] = [['restore', 'wall s', 'peak RSS MB', 'revisions/s', 'result']];
try {
  const client = cluster.client();
  const { base, last } = await buildStore(client, cluster.endpoints);
  const source = await keyspaceFingerprint(client, last);
  await cluster.stop(); // nothing else runs while restores are measured

  for (const method of values.replay!.split(',')) {
    const dataDir = join(work, `restored-${method}`);
    await rm(dataDir, { recursive: true, force: true });
    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const run = await measure(process.execPath, [
      join(root, 'packages/restore/bin/etcd-restore.js'),
      '--store',
      `file://${storeDir}`,
      '--data-dir',
      dataDir,
      '--name',
      'bench',
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster-token',
      'bench',
      '--replay',
      method,
      '--output',
      'json',
    ]);
    if (run.code !== 0)
      throw new Error(`etcd-restore --replay ${method} failed: ${run.stderr.trim().split('\n').at(-1)}`);
    const result = JSON.parse(run.stdout);
    const [restored] = await fingerprintRestored([{ name: 'bench', dataDir, peerPort }], {
      initialCluster: `bench=${peer}`,
      clusterToken: 'bench',
    });
    const same = restored.sha256 === source.sha256 && restored.revision === source.revision;
    rows.push([
      `etcd-restore --replay ${method}`,
      run.seconds.toFixed(1),
      run.peakRssMb.toFixed(0),
      ((last - base) / run.seconds).toFixed(0),
      `rev ${result.revision}, ${same ? 'fingerprint = source' : 'FINGERPRINT DIFFERS'}; own peak ${(result.peakRssBytes / 1048576).toFixed(0)} MB`,
    ]);
  }

  // etcd's own tool, for the full snapshot only (no deltas): what any restore pays at least.
  const [fullName] = (await readdir(join(storeDir, 'v2'))).filter((n) => n.startsWith('Full-'));
  const plain = join(work, 'full.db');
  await pipeline(createReadStream(join(storeDir, 'v2', fullName)), createGunzip(), createWriteStream(plain));
  const etcdctlDir = join(work, 'etcdctl-restored');
  await rm(etcdctlDir, { recursive: true, force: true });
  const etcdctl = await measure('etcdctl', ['snapshot', 'restore', plain, `--data-dir=${etcdctlDir}`], {
    ETCDCTL_API: '3',
  });
  rows.push([
    'etcdctl snapshot restore (full only)',
    etcdctl.seconds.toFixed(1),
    etcdctl.peakRssMb.toFixed(0),
    '-',
    `rev ${base}, no deltas`,
  ]);

  const ebr = process.env.EBR_BIN;
  if (ebr) {
    // ebr's Local provider: the container is a directory, the prefix the store folder inside it.
    const ebrDir = join(work, 'ebr-restored');
    await rm(ebrDir, { recursive: true, force: true });
    const args = (
      process.env.EBR_ARGS ??
      'restore --storage-provider=Local --store-container={container} --store-prefix={prefix} --data-dir={dataDir} --embedded-etcd-quota-bytes=8589934592'
    )
      .replaceAll('{container}', dirname(storeDir))
      .replaceAll('{prefix}', basename(storeDir))
      .replaceAll('{dataDir}', ebrDir)
      .split(' ');
    const run = await measure(ebr, args);
    rows.push([
      'ebr restore',
      run.seconds.toFixed(1),
      run.peakRssMb.toFixed(0),
      ((last - base) / run.seconds).toFixed(0),
      run.code === 0 ? 'ok' : `exit ${run.code}`,
    ]);
  } else {
    rows.push(['ebr restore', 'not given', '', '', 'set EBR_BIN to etcdbrctl']);
  }
  console.log('');
  console.log(
    `base ${keys} keys x ${valueSize} B (revision ${base}), ${last - base} delta revisions (values ${deltaValueSize} B)`,
  );
  printTable(rows);
} finally {
  await cluster.stop().catch(() => {});
  if (!values.keep) await rm(work, { recursive: true, force: true });
}
