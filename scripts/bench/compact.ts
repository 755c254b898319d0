// etcd-compact on a long chain, and what it buys: a base of `--keys` keys in a real etcd, a full snapshot of it,
// then `--events` delta revisions after it (made up with the testing package's synthetic events, as the
// compaction test does: writing them through etcd takes minutes). Measured, each as a process tree (wall time,
// peak RSS): etcd-restore from the chain, etcd-compact, etcd-restore from the compacted full snapshot alone, and
// ebr's `etcdbrctl compact` on a copy of the same store when EBR_BIN names it (EBR_COMPACT_ARGS overrides
// its arguments; {container}, {prefix} and {dir} are filled in: ebr.ts). Goal (issue #14): at most half ebr's time and
// peak memory.
//
// Before this checkout's etcd-compact, the same compaction with the etcd engine (a private etcd compacts and
// defragments, as ebr's embedded one does: compact-etcd-engine.ts) runs on a copy of the same store, for the
// direct engine against it on the same load. `--baseline DIR` measures, before both, the etcd-compact built in
// DIR (a checkout of an earlier commit after `pnpm exec tsc -b`, or a copy of its packages/ beside a
// node_modules link) on another copy.
//
// `--memory-limit 256Mi` runs etcd-compact a second time (on a copy of the store as it was before the first)
// in a memory cgroup with that limit, as a CronJob with `resources.limits.memory` would (cgroup v1, as root).
//
// Usage: node scripts/bench/compact.ts [--keys 100000] [--value-size 900] [--events 200000]
//          [--delta-value-size 900] [--deltas 10] [--baseline DIR] [--memory-limit 256Mi] [--keep DIR]
// A quick run: node scripts/bench/compact.ts --keys 10000 --events 20000
// On a shared machine: flock /tmp/etcd-steward-bench.lock node scripts/bench/compact.ts ...
import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Etcd3, type KeyspaceFingerprint, LocalStore, takeFullSnapshot } from '@etcd-steward/core';
import { startCluster, storeDeltas, syntheticEvents } from '@etcd-steward/testing';
import { ETCD_ENGINE, measureCompaction } from './compact-run.ts';
import { ebrCommand } from './ebr.ts';
import { type Measurement, measure, printTable } from './measure.ts';
import { parseMemoryQuantity } from './memory-cgroup.ts';
import { failure, measureRestore } from './restore-run.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    'value-size': { type: 'string', default: '900' },
    events: { type: 'string', default: '200000' },
    'delta-value-size': { type: 'string', default: '900' },
    deltas: { type: 'string', default: '10' },
    'memory-limit': { type: 'string' },
    baseline: { type: 'string' },
    keep: { type: 'string' },
  },
});
const keys = Number(values.keys);
const valueSize = Number(values['value-size']);
const events = Number(values.events);
const deltaCount = Number(values.deltas);
const work = values.keep ?? (await mkdtemp(join(tmpdir(), 'bench-compact-')));
await mkdir(work, { recursive: true });
const storeDir = join(work, 'store');
const ebrStoreDir = join(work, 'ebr', 'store');
const limitedStoreDir = join(work, 'limited', 'store');
const baselineStoreDir = join(work, 'baseline', 'store');
const etcdEngineStoreDir = join(work, 'etcd-engine', 'store');
const memoryLimit = values['memory-limit'] ? parseMemoryQuantity(values['memory-limit']) : undefined;

/** The base in txns of 100 puts of Kubernetes-like values (a JSON head, a random tail); a full snapshot of it. */
async function buildStore(client: Etcd3, endpoints: string[]): Promise<{ base: number; last: number }> {
  console.log(`loading ${keys} keys of ${valueSize} B…`);
  for (let b = 0; b < Math.ceil(keys / 100); b += 8) {
    await Promise.all(
      Array.from({ length: Math.min(8, Math.ceil(keys / 100) - b) }, (_, k) =>
        client.kv.txn({
          compare: [],
          success: Array.from({ length: Math.min(100, keys - (b + k) * 100) }, (_, j) => {
            const i = (b + k) * 100 + j;
            const head = JSON.stringify({ kind: 'ConfigMap', name: `cm-${i}` });
            return {
              request_put: {
                key: Buffer.from(`/registry/configmaps/ns-${i % 100}/cm-${i}`),
                value: Buffer.concat([Buffer.from(head), randomBytes(Math.max(0, valueSize - head.length))]),
              },
            };
          }),
          failure: [],
        }),
      ),
    );
  }
  const store = new LocalStore(storeDir);
  const full = await takeFullSnapshot({ connection: { endpoints }, store, compression: 'gzip', tempDir: work });
  console.log(`full snapshot at revision ${full.revision}, ${(full.storedSize / 1e6).toFixed(0)} MB stored`);
  const made = syntheticEvents({
    startRevision: full.revision + 1,
    revisions: events,
    keys: Math.max(1000, keys / 10),
    valueSize: Number(values['delta-value-size']),
  });
  const cuts = Array.from(
    { length: deltaCount - 1 },
    (_, i) => full.revision + 1 + Math.round(((i + 1) * events) / deltaCount),
  );
  await storeDeltas(store, made, { startRevision: full.revision + 1, cuts, compression: 'gzip' });
  console.log(`${events} delta revisions in ${deltaCount} deltas`);
  return { base: full.revision, last: made[made.length - 1].modRevision };
}

const mb = (v: number) => v.toFixed(0);
const rows: string[][] = [['run', 'wall s', 'peak RSS MB', 'peak anon MB', 'cgroup max MB', 'load', 'result']];
const phaseRows: string[][] = [['etcd-compact phase', 's', 'tree RSS MB', 'anon MB']];

function record(name: string, run: Measurement, loadBefore: string, result: string): void {
  const load = loadavg()[0].toFixed(1);
  const cgroup = run.cgroup
    ? `${mb(run.cgroup.maxUsageMb)} of ${mb(run.cgroup.limitMb)} (hit ${run.cgroup.failcnt}x${run.cgroup.oomKills ? `, OOM kills ${run.cgroup.oomKills}` : ''})`
    : '-';
  rows.push([
    name,
    run.seconds.toFixed(1),
    mb(run.peakRssMb),
    mb(run.peakAnonMb),
    cgroup,
    `${loadBefore}→${load}`,
    result,
  ]);
}

/** etcd-restore of the store's newest state, measured; the result's fingerprint. */
async function measuredRestore(name: string): Promise<KeyspaceFingerprint | undefined> {
  const dataDir = join(work, name);
  await rm(dataDir, { recursive: true, force: true });
  const loadBefore = loadavg()[0].toFixed(1);
  const { run, result, fingerprint } = await measureRestore({ storeDir, dataDir });
  record(
    name,
    run,
    loadBefore,
    result ? `rev ${result.revision} from ${basename(result.snapshot)} + ${result.deltas.length} deltas` : failure(run),
  );
  await rm(dataDir, { recursive: true, force: true });
  return fingerprint;
}

/** etcd-compact (of the checkout `from`) of the store in `dir`, measured (in a memory cgroup when `limit` is given). */
async function measuredCompaction(name: string, dir: string, limit?: number, from?: string): Promise<Measurement> {
  const loadBefore = loadavg()[0].toFixed(1);
  const { run, result } = await measureCompaction(dir, work, limit, from);
  record(
    name,
    run,
    loadBefore,
    result
      ? `${result.revisionsFolded} revisions folded; ${mb(result.chainBytes / 1e6)} MB chain → ${mb(result.snapshotBytes / 1e6)} MB (zstd)`
      : failure(run),
  );
  return run;
}

try {
  const cluster = await startCluster();
  let built: { base: number; last: number };
  try {
    built = await buildStore(cluster.client(), cluster.endpoints);
  } finally {
    await cluster.stop(); // nothing else runs while the programs are measured
  }
  await cp(storeDir, ebrStoreDir, { recursive: true });
  if (memoryLimit) await cp(storeDir, limitedStoreDir, { recursive: true });
  if (values.baseline) await cp(storeDir, baselineStoreDir, { recursive: true });
  await cp(storeDir, etcdEngineStoreDir, { recursive: true });

  const before = await measuredRestore('etcd-restore, chain');

  if (values.baseline) {
    const baseline = await measuredCompaction('etcd-compact, baseline', baselineStoreDir, undefined, values.baseline);
    for (const p of baseline.phases)
      phaseRows.push([`baseline: ${p.name}`, p.seconds.toFixed(1), mb(p.rssMb), mb(p.anonMb)]);
  }
  const inEtcd = await measuredCompaction('etcd-compact, etcd engine', etcdEngineStoreDir, undefined, ETCD_ENGINE);
  for (const p of inEtcd.phases)
    phaseRows.push([`etcd engine: ${p.name}`, p.seconds.toFixed(1), mb(p.rssMb), mb(p.anonMb)]);
  const run = await measuredCompaction('etcd-compact', storeDir);
  for (const p of run.phases) phaseRows.push([p.name, p.seconds.toFixed(1), mb(p.rssMb), mb(p.anonMb)]);

  const after = await measuredRestore('etcd-restore, compacted full');
  const same = before && after && before.sha256 === after.sha256 && before.revision === after.revision;
  rows.push(['fingerprints', '', '', '', '', '', same ? 'chain = compacted full' : 'DIFFER']);

  if (memoryLimit)
    await measuredCompaction(`etcd-compact, ${values['memory-limit']} limit`, limitedStoreDir, memoryLimit);

  const ebrCompact = ebrCommand('compact', ebrStoreDir, { dir: join(work, 'ebr') });
  if (ebrCompact) {
    await mkdir(join(work, 'ebr', 'tmp'), { recursive: true });
    const loadBefore = loadavg()[0].toFixed(1);
    const ebrRun = await measure(ebrCompact.bin, ebrCompact.args);
    record('ebr compact', ebrRun, loadBefore, ebrRun.code === 0 ? 'ok' : `exit ${ebrRun.code}`);
  } else {
    rows.push(['ebr compact', 'not given', '', '', '', '', 'set EBR_BIN to etcdbrctl']);
  }
  console.log('');
  console.log(
    `base ${keys} keys x ${valueSize} B (revision ${built.base}), ${built.last - built.base} delta revisions in ${deltaCount} deltas`,
  );
  printTable(rows);
  console.log('');
  printTable(phaseRows);
} finally {
  if (!values.keep) await rm(work, { recursive: true, force: true });
}
