// etcd-restore against `etcdctl snapshot restore` of the full snapshot alone, and against ebr's restore when
// EBR_BIN names its etcdbrctl (EBR_RESTORE_ARGS overrides its arguments, ebr.ts): a ~130 MB base (100,000 keys) plus 200,000 delta revisions written to a real
// etcd, side by side: wall time and peak RSS of each process tree. Targets (issue #5): at most 0.5x ebr's time
// (ebr measured 39 s here) and 0.5x its peak RSS (593 MB), and under 256 MB.
//
// Each restore's memory is broken down per process (by role), per phase of the run (from its log lines) and
// per kind: anonymous memory (the heap: what a container's memory limit cannot take back) and file-backed
// memory (mapped files such as etcd's db, and the programs' own code: clean pages the kernel can drop).
// `--memory-limit 256Mi` runs each restore a second time in a memory cgroup with that limit, as a Kubernetes
// Job with `resources.limits.memory: 256Mi` would (cgroup v1, as root), and reports whether it completes.
//
// Usage: node scripts/bench/restore.ts [--keys 100000] [--events 200000] [--value-size 900]
//          [--delta-value-size 900] [--deltas 10] [--replay direct,grpc] [--verify check,etcd] [--runs 1]
//          [--memory-limit 256Mi] [--baseline DIR]
//          [--keep DIR [--reuse]]
// --reuse takes the store (and the source's fingerprint) a run with --keep DIR left there, instead of
// loading etcd again. `--baseline DIR` also measures the etcd-restore built in DIR (a checkout of an earlier
// commit after `pnpm exec tsc -b`), interleaved with this checkout's: before and after a change in one run. A quick run: node scripts/bench/restore.ts --keys 10000 --events 20000
// On a shared machine: flock /tmp/etcd-steward-bench.lock node scripts/bench/restore.ts ...
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { createGunzip } from 'node:zlib';
import {
  type Etcd3,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { startCluster, storeDeltas, watchEvents } from '@etcd-steward/testing';
import { ebrCommand } from './ebr.ts';
import { formatTable, type Measurement, measure, printTable } from './measure.ts';
import { parseMemoryQuantity } from './memory-cgroup.ts';
import { failure, measureRestore } from './restore-run.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    events: { type: 'string', default: '200000' },
    'value-size': { type: 'string', default: '900' },
    'delta-value-size': { type: 'string', default: '900' },
    deltas: { type: 'string', default: '10' },
    replay: { type: 'string', default: 'direct' },
    verify: { type: 'string', default: 'check,etcd' },
    runs: { type: 'string', default: '1' },
    'memory-limit': { type: 'string' },
    keep: { type: 'string' },
    reuse: { type: 'boolean', default: false },
    baseline: { type: 'string' },
  },
});
const keys = Number(values.keys);
const events = Number(values.events);
const valueSize = Number(values['value-size']);
const deltaValueSize = Number(values['delta-value-size']);
const work = values.keep ?? (await mkdtemp(join(tmpdir(), 'bench-restore-')));
await mkdir(work, { recursive: true });
const storeDir = join(work, 'store');
const memoryLimit = values['memory-limit'] ? parseMemoryQuantity(values['memory-limit']) : undefined;
const runs = Number(values.runs);

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

/** What a built store holds, kept beside it for --reuse. */
interface BuiltStore {
  base: number;
  last: number;
  source: KeyspaceFingerprint;
}

async function builtStore(): Promise<BuiltStore> {
  const saved = join(work, 'bench-store.json');
  if (values.reuse) {
    const built = JSON.parse(await readFile(saved, 'utf8').catch(() => 'null')) as BuiltStore | null;
    if (built) {
      console.log(`reusing the store in ${storeDir}: revisions ${built.base} + ${built.last - built.base}`);
      return built;
    }
  }
  await rm(storeDir, { recursive: true, force: true });
  const cluster = await startCluster();
  try {
    const client = cluster.client();
    const { base, last } = await buildStore(client, cluster.endpoints);
    const built = { base, last, source: await keyspaceFingerprint(client, last) };
    await writeFile(saved, JSON.stringify(built));
    return built;
  } finally {
    await cluster.stop(); // nothing else runs while restores are measured
  }
}

const mbText = (v: number | undefined) => (v === undefined ? '' : v.toFixed(0));
const load = () => loadavg()[0].toFixed(1);

const runRows: string[][] = [
  ['restore', 'limit', 'wall s', 'peak RSS MB', 'peak anon MB', 'cgroup max MB', 'load', 'result'],
];
const detail: string[] = [];

function record(name: string, run: Measurement, loadBefore: string, result: string): void {
  runRows.push([
    name,
    run.cgroup ? `${run.cgroup.limitMb.toFixed(0)} MiB` : '-',
    run.seconds.toFixed(1),
    mbText(run.peakRssMb),
    mbText(run.peakAnonMb),
    run.cgroup
      ? `${mbText(run.cgroup.maxUsageMb)} (anon ${mbText(run.cgroup.peakAnonMb)}, hit ${run.cgroup.failcnt}x${run.cgroup.oomKills ? `, OOM kills ${run.cgroup.oomKills}` : ''})`
      : '-',
    `${loadBefore}→${load()}`,
    result,
  ]);
  const per = [['process', 'peak RSS MB', 'anon MB', 'file MB']];
  for (const [role, p] of run.processes) per.push([role, mbText(p.rssMb), mbText(p.anonMb), mbText(p.fileMb)]);
  const phases = [['phase', 's', 'tree RSS MB', 'anon MB', 'file MB']];
  for (const p of run.phases)
    phases.push([p.name, p.seconds.toFixed(1), mbText(p.rssMb), mbText(p.anonMb), mbText(p.fileMb)]);
  detail.push(
    `\n${name}${run.cgroup ? ` in a ${run.cgroup.limitMb.toFixed(0)} MiB cgroup` : ''}:`,
    ...formatTable(per),
    '',
    ...formatTable(phases),
  );
}

try {
  const { base, last, source } = await builtStore();
  const limits = memoryLimit ? [undefined, memoryLimit] : [undefined];
  // Interleaved, so that the shared machine's load falls on every case alike.
  for (let i = 0; i < runs; i++) {
    for (const [method, verify] of values
      .replay!.split(',')
      .flatMap((m) => values.verify!.split(',').map((v) => [m, v]))) {
      for (const [limit, checkout] of limits.flatMap((l) =>
        values.baseline ? [[l, values.baseline] as const, [l, undefined] as const] : [[l, undefined] as const],
      )) {
        const dataDir = join(work, `restored-${method}`);
        await rm(dataDir, { recursive: true, force: true });
        const loadBefore = load();
        const { run, result, fingerprint } = await measureRestore({
          storeDir,
          dataDir,
          replay: method,
          verify,
          memoryLimitBytes: limit,
          root: checkout,
        });
        const name = `etcd-restore --replay ${method} --verify ${verify}${checkout ? ' (baseline)' : ''}`;
        if (!result || !fingerprint) {
          record(name, run, loadBefore, failure(run));
          continue;
        }
        const same = fingerprint.sha256 === source.sha256 && fingerprint.revision === source.revision;
        // --verify check read the fingerprint from the db file: it must be the source's too
        const fromFile = result.fingerprint
          ? result.fingerprint.sha256 === source.sha256
            ? ", db file's = source"
            : ", DB FILE'S DIFFERS"
          : '';
        record(
          name,
          run,
          loadBefore,
          `rev ${result.revision}, ${same ? 'fingerprint = source' : 'FINGERPRINT DIFFERS'}${fromFile}; peak ${(result.peakRssBytes / 1048576).toFixed(0)} MB`,
        );
      }
    }
  }

  // etcd's own tool, for the full snapshot only (no deltas): what any restore pays at least.
  const [fullName] = (await readdir(join(storeDir, 'v2'))).filter((n) => n.startsWith('Full-'));
  const plain = join(work, 'full.db');
  await pipeline(createReadStream(join(storeDir, 'v2', fullName)), createGunzip(), createWriteStream(plain));
  const etcdctlDir = join(work, 'etcdctl-restored');
  await rm(etcdctlDir, { recursive: true, force: true });
  const loadBefore = load();
  const etcdctl = await measure('etcdctl', ['snapshot', 'restore', plain, `--data-dir=${etcdctlDir}`], {
    env: { ETCDCTL_API: '3' },
  });
  record('etcdctl snapshot restore (full only)', etcdctl, loadBefore, `rev ${base}, no deltas`);
  await rm(plain, { force: true });

  const ebrRestore = ebrCommand('restore', storeDir, { dataDir: join(work, 'ebr-restored') });
  if (ebrRestore) {
    await rm(join(work, 'ebr-restored'), { recursive: true, force: true });
    const loadBefore = load();
    const run = await measure(ebrRestore.bin, ebrRestore.args);
    record('ebr restore', run, loadBefore, run.code === 0 ? 'ok' : `exit ${run.code}`);
  } else {
    runRows.push(['ebr restore', '', 'not given', '', '', '', '', 'set EBR_BIN to etcdbrctl']);
  }
  console.log('');
  console.log(
    `base ${keys} keys x ${valueSize} B (revision ${base}), ${last - base} delta revisions (values ${deltaValueSize} B)`,
  );
  printTable(runRows);
  for (const line of detail) console.log(line);
} finally {
  if (!values.keep) await rm(work, { recursive: true, force: true });
}
