// Where etcd-restore spends its time (issue 32): each phase of a restore done alone, one after the other in this
// process, on a store's newest chain — the full snapshot fetched, decompressed and checked; every delta fetched and
// decompressed; the deltas' events parsed; the replay (parse and write) and its commit with the db's fsync; the
// member data dir laid out; the verification's pass over the db (the full check, the keyspace's rows) and its second
// read of the live rows — then etcd-restore as a process, each phase from its log lines, interleaved with
// `etcdctl snapshot restore` of the full snapshot at the same revision (the floor) and with the build in `--before
// DIR` (the root of another built checkout). On a shared machine, compare the ratios.
// Usage: node scripts/bench/restore-phases.ts --store DIR [--etcdctl-db FILE] [--before DIR] [--rounds 3]
//          [--work /tmp/bench-restore-phases] [--skip-phases] [--synthetic N]
// The suite's dataset: `scripts/bench/run --keep DIR` leaves its store in DIR/store and etcdctl's snapshot at the
// same revision in DIR/etcdctl.db. The 1M-revision one: `--synthetic 1000000` beside the suite's store (its full
// snapshot and a million made-up revisions after it, as compact.ts makes them).
import { mkdir, rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  DirectReplayEngine,
  fetchDelta,
  fetchFullSnapshot,
  findEtcdBinaries,
  freePort,
  fsyncPath,
  KeyspaceReader,
  LocalStore,
  layOutAroundEmptyDb,
  listSnapshots,
  moveDbIntoLayout,
  planRestore,
  readDeltaRevisions,
  validateDataDir,
} from '@etcd-steward/core';
import { storeDeltas, syntheticEvents } from '@etcd-steward/testing';
import { measure, printTable } from './measure.ts';
import { restorePhase } from './restore-run.ts';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    'etcdctl-db': { type: 'string' },
    before: { type: 'string', multiple: true },
    rounds: { type: 'string', default: '3' },
    work: { type: 'string', default: '/tmp/bench-restore-phases' },
    'skip-phases': { type: 'boolean', default: false },
    synthetic: { type: 'string' },
  },
});
if (!values.store) throw new Error('give --store DIR: a local store, e.g. the one scripts/bench/run --keep leaves');
const storeDir = values.synthetic ? await syntheticStore(values.store, Number(values.synthetic)) : values.store;
const rounds = Number(values.rounds);
const work = values.work;
const root = new URL('../..', import.meta.url).pathname;
const restoreBin = (checkout: string) => join(checkout, 'packages/restore/bin/etcd-restore.js');
const load = () => loadavg()[0].toFixed(1);

/**
 * `--synthetic N`: a store of --store's newest full snapshot and N revisions after it in 10 zstd deltas, made up
 * by the testing package's synthetic events (keys of their own beside the snapshot's, values of 900 B, as
 * compact.ts makes them), in `--work`'s sibling `<work>-store`, made once and kept.
 */
async function syntheticStore(from: string, revisions: number): Promise<string> {
  const dir = `${values.work}-store`;
  const made = new LocalStore(dir);
  if ((await listSnapshots(made).catch(() => [])).length > 0) return dir;
  const source = new LocalStore(from);
  const full = (await listSnapshots(source)).filter((e) => e.kind === 'Full').at(-1)!;
  await made.put(full.name, await source.get(full.name), { metadata: (await source.stat(full.name))?.metadata });
  const start = full.lastRevision + 1;
  const events = syntheticEvents({ startRevision: start, revisions, keys: 10_000, valueSize: 900 });
  const cuts = Array.from({ length: 9 }, (_, i) => start + Math.round(((i + 1) * revisions) / 10));
  await storeDeltas(made, events, { startRevision: start, cuts, compression: 'zstd' });
  return dir;
}

const store = new LocalStore(storeDir);
const plan = await planRestore(store, {});
const chain = plan.chains[0];
const deltaFile = (i: number) => join(work, 'deltas', `${i}.json`);
console.log(
  `${chain.full.name} + ${chain.deltas.length} deltas to revision ${chain.lastRevision}; ${(await listSnapshots(store)).length} objects; load ${load()}`,
);

/** The phases, in order, each after the one before (a phase works on what the previous ones left). */
async function phasesOnce(): Promise<Array<[string, number]>> {
  await rm(work, { recursive: true, force: true });
  await mkdir(join(work, 'deltas'), { recursive: true });
  const out: Array<[string, number]> = [];
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const value = await fn();
    out.push([name, (performance.now() - started) / 1000]);
    return value;
  };
  const baseFile = join(work, 'base.db');
  const base = await timed('fetch + decompress + check the full snapshot', () =>
    fetchFullSnapshot(store, chain.full, baseFile),
  );
  await timed('fetch + decompress + check the deltas, one at a time', async () => {
    for (const [i, entry] of chain.deltas.entries())
      await fetchDelta(store, entry, deltaFile(i), { base: { revision: base.revision, dbSize: base.size } });
  });
  let revisions = 0;
  await timed("parse the deltas' events into revisions (checked files: no second sha256)", async () => {
    for (const [i, entry] of chain.deltas.entries())
      for await (const revs of readDeltaRevisions(deltaFile(i), entry, entry.name, { verified: true }))
        for (const rev of revs) if (rev.revision > base.revision) revisions++;
  });
  const engine = new DirectReplayEngine();
  await timed('replay: parse + write the rows (no commit)', async () => {
    await engine.open({ file: baseFile, revision: base.revision });
    for (const [i, entry] of chain.deltas.entries())
      for await (const revs of readDeltaRevisions(deltaFile(i), entry, entry.name, { verified: true }))
        for (const rev of revs) if (rev.revision > base.revision) engine.apply(rev);
  });
  await timed('replay: commit + read back', () => engine.finishInPlace());
  await engine.close();
  const dataDir = join(work, 'data');
  const binaries = await findEtcdBinaries();
  const peer = `http://127.0.0.1:${await freePort()}`;
  const member = {
    name: 'bench',
    initialCluster: `bench=${peer}`,
    initialClusterToken: 'bench',
    initialAdvertisePeerUrls: peer,
  };
  const db = await timed('lay out the data dir (etcd tool on an empty db, its rows carried over)', async () => {
    await layOutAroundEmptyDb(binaries, dataDir, member);
    return moveDbIntoLayout(binaries, baseFile, dataDir);
  });
  await timed('fsync the db (the restore overlaps it with the verification)', () => fsyncPath(db));
  const rows = new KeyspaceReader({ tmpDir: work, earlierRevision: base.revision });
  await timed("verify: the full check's pass (tree, WAL) + the keyspace's rows", () =>
    validateDataDir({
      dataDir,
      mode: 'full',
      maxRevisionsAhead: Number.POSITIVE_INFINITY,
      onLeaf: (bucket, id, page) => rows.addLeaf(bucket, id, page),
    }),
  );
  await timed("verify: the live rows read again, the keyspace's fingerprint", async () =>
    rows.finish(join(dataDir, 'member', 'snap', 'db')),
  );
  rows.close();
  out.push([`(${revisions} revisions replayed)`, Number.NaN]);
  return out;
}

if (!values['skip-phases']) {
  const best = new Map<string, number>();
  for (let i = 0; i < rounds; i++)
    for (const [name, s] of await phasesOnce()) best.set(name, Math.min(best.get(name) ?? Number.POSITIVE_INFINITY, s));
  const total = [...best.values()].filter((s) => !Number.isNaN(s)).reduce((a, b) => a + b, 0);
  printTable([
    ['phase (in this process, one after the other)', 'best s'],
    ...[...best].map(([name, s]) => [name, Number.isNaN(s) ? '' : s.toFixed(3)]),
    ['sum', total.toFixed(3)],
  ]);
  console.log(`load after the phases: ${load()}`);
}

/**
 * A command under /usr/bin/time, for the CPU seconds of its whole tree (a process's rusage counts the children it
 * waited for): on a shared machine, wall time moves with the load and CPU time much less.
 */
async function measureWithCpu(
  command: string,
  args: string[],
  options: Parameters<typeof measure>[2] = {},
): Promise<Awaited<ReturnType<typeof measure>> & { cpuSeconds: number }> {
  const m = await measure('/usr/bin/time', ['-f', 'cpu %U %S', command, ...args], options);
  const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(m.stderr);
  return { ...m, cpuSeconds: cpu ? Number(cpu[1]) + Number(cpu[2]) : Number.NaN };
}

/** The processes, interleaved round by round so that the machine's load falls on each alike. */
const runs: Array<{ name: string; run: () => ReturnType<typeof measureWithCpu> }> = [];
const restoreRun = (checkout: string) => async () => {
  const dataDir = join(work, 'restored');
  await rm(dataDir, { recursive: true, force: true });
  const peer = `http://127.0.0.1:${await freePort()}`;
  return measureWithCpu(
    process.execPath,
    [
      restoreBin(checkout),
      ...['--store', `file://${storeDir}`, '--data-dir', dataDir, '--name', 'bench'],
      ...['--initial-advertise-peer-urls', peer, '--initial-cluster-token', 'bench', '--output', 'json'],
    ],
    { phaseOf: restorePhase },
  );
};
runs.push({ name: 'etcd-restore, this build', run: restoreRun(root) });
for (const dir of values.before ?? []) runs.push({ name: `etcd-restore, ${basename(dir)}`, run: restoreRun(dir) });
const etcdctlDb = values['etcdctl-db'];
if (etcdctlDb) {
  runs.push({
    name: 'etcdctl snapshot restore (full at the same revision)',
    run: async () => {
      const dataDir = join(work, 'etcdctl-restored');
      await rm(dataDir, { recursive: true, force: true });
      return measureWithCpu('etcdctl', ['snapshot', 'restore', etcdctlDb, `--data-dir=${dataDir}`], {
        env: { ETCDCTL_API: '3' },
      });
    },
  });
}
const results = new Map<string, Array<Awaited<ReturnType<typeof measureWithCpu>>>>();
await mkdir(work, { recursive: true });
for (let i = 0; i < rounds; i++) {
  for (const { name, run } of runs) {
    const m = await run();
    if (m.code !== 0) throw new Error(`${name} exited ${m.code}: ${m.stderr.slice(-2000)}`);
    results.set(name, [...(results.get(name) ?? []), m]);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const floor = results.get('etcdctl snapshot restore (full at the same revision)');
const firstBefore = values.before?.[0];
const reference = floor ?? (firstBefore ? results.get(`etcd-restore, ${basename(firstBefore)}`) : undefined);
const runRows = [
  ['process', 'runs s', 'median s', 'CPU s (median)', 'peak RSS MB', reference === floor ? '÷ etcdctl' : '÷ before'],
];
for (const [name, ms] of results) {
  const s = ms.map((m) => m.seconds);
  runRows.push([
    name,
    s.map((x) => x.toFixed(2)).join(', '),
    median(s).toFixed(2),
    median(ms.map((m) => m.cpuSeconds)).toFixed(2),
    median(ms.map((m) => m.peakRssMb)).toFixed(0),
    reference ? `${(median(s) / median(reference.map((m) => m.seconds))).toFixed(2)}×` : '',
  ]);
}
console.log('');
printTable(runRows);
const phaseRows = [
  [
    'process phase (from its log lines; median)',
    ...[...results.keys()].filter((n) => n !== 'etcdctl snapshot restore (full at the same revision)'),
  ],
];
const names = [...new Set([...results.values()].flatMap((ms) => ms.flatMap((m) => m.phases.map((p) => p.name))))];
for (const phase of names) {
  phaseRows.push([
    phase,
    ...[...results]
      .filter(([n]) => n !== 'etcdctl snapshot restore (full at the same revision)')
      .map(([, ms]) => median(ms.map((m) => m.phases.find((p) => p.name === phase)?.seconds ?? 0)).toFixed(2)),
  ]);
}
console.log('');
printTable(phaseRows);
console.log(`load after: ${load()}`);
await rm(work, { recursive: true, force: true });
