// The benchmark suite: one reproducible dataset, every program on it, one table with each figure beside its
// reference measured in the same run (etcdctl; ebr's etcdbrctl when EBR_BIN names it), as ratios, with the peak
// memory of each whole process tree. Exits 1 on a wrong result (a restore or a compaction whose keyspace differs
// from the source, a copy that lost an object), never on a timing. Run it as `scripts/bench/run [--quick]`.
//
// The dataset: a base of --keys keys of 1 KiB, then --revisions single puts over --over keys at --rate a second,
// written while the sidecar (etcd-snapshot run) takes a delta every 5 s; values depend on their index alone
// (write-load.ts). The sidecar's store (its first full snapshot, taken of the base, and its deltas) is then what
// restore, compact, gc and copy work on; save and validate work on the same etcd and its restored data dir.
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type CompressionPolicy,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  listSnapshots,
  memberStatus,
} from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { measureCompaction } from './compact-run.ts';
import { loadConfigMaps } from './config-maps.ts';
import { measureS3Copies } from './copy-run.ts';
import { ebrCommand } from './ebr.ts';
import { measureLog } from './log-run.ts';
import { type Measurement, measure, printTable } from './measure.ts';
import { failure, measureRestore } from './restore-run.ts';
import { measureEtcdctlSave, measureSave } from './save-run.ts';
import { storeReaches, until } from './store-progress.ts';
import { loadValue, valuePool, writeLoad } from './write-load.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    keys: { type: 'string' },
    revisions: { type: 'string' },
    over: { type: 'string' },
    rate: { type: 'string', default: '3600' },
    keep: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: scripts/bench/run [--quick] [--keys N] [--revisions M] [--over K] [--rate 3600] [--keep DIR]
A base of N keys of 1 KiB, then M single-put revisions over K keys at --rate puts/s while the sidecar takes deltas;
then every program on that dataset, each beside its reference. Defaults: N 130000 (a ~140 MB db), M 200000,
K 10000; --quick: N 5000, M 20000, K 1000 (under 2 minutes). EBR_BIN=/path/to/etcdbrctl adds ebr's snapshot,
restore, compact and copies: local → local, and through an S3 test server local → S3, S3 → local (with the CPU of
each) and S3 → S3 between two of its buckets (the sidecar then writes gzip, which ebr reads). Exits 1 on a wrong
result.
--keep DIR works in DIR and leaves the dataset there: the sidecar's store (DIR/store), etcdctl's snapshot at the
same revision (DIR/etcdctl.db) and the source's fingerprint (DIR/source.json), for restore-phases.ts. DIR must be
empty or new.`);
  process.exit(0);
}
const preset = values.quick
  ? { keys: 5_000, revisions: 20_000, over: 1_000 }
  : { keys: 130_000, revisions: 200_000, over: 10_000 };
const keys = Number(values.keys ?? preset.keys);
const revisions = Number(values.revisions ?? preset.revisions);
const over = Number(values.over ?? preset.over);
const rate = Number(values.rate);
const compression: CompressionPolicy = process.env.EBR_BIN ? 'gzip' : 'zstd';
const root = new URL('../..', import.meta.url).pathname;
const bin = (pkg: string, name: string) => join(root, 'packages', pkg, 'bin', `${name}.js`);
if (values.keep && (await readdir(values.keep).catch(() => [])).length > 0) {
  // the sidecars would find the earlier run's store ahead of the fresh etcd, and every row would measure that store
  console.error(`--keep ${values.keep} holds an earlier run's dataset: remove it, or name an empty or new folder`);
  process.exit(2);
}
const work = values.keep ?? (await mkdtemp(join(tmpdir(), 'bench-run-')));
await mkdir(work, { recursive: true });
const storeDir = join(work, 'store');

type Row = {
  program: string;
  ours?: Measurement;
  reference?: string;
  theirs?: Measurement;
  result: string;
};
const rows: Row[] = [];
/** ebr's run of a program's work, on a row of its own, when EBR_BIN names ebr. */
async function pushEbrRow(program: string, reference: string, command: ReturnType<typeof ebrCommand>): Promise<void> {
  if (!command) return;
  const run = await measure(command.bin, command.args);
  rows.push({ program, reference, theirs: run, result: run.code === 0 ? 'ebr: ok' : `ebr: exit ${run.code}` });
}
const wrong: string[] = [];
const same = (a: KeyspaceFingerprint | undefined, b: KeyspaceFingerprint) =>
  a !== undefined && a.sha256 === b.sha256 && a.revision === b.revision;

console.log(
  `dataset: ${keys} keys of 1 KiB, then ${revisions} revisions over ${over} keys at ${rate}/s; ${compression}; ${cpus().length} CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, load ${loadavg()[0].toFixed(1)}`,
);
let source: KeyspaceFingerprint;
const cluster = await startCluster();
try {
  const client = cluster.client();
  const endpoint = cluster.endpoints[0];
  const pool = valuePool();
  await loadConfigMaps(client, keys, (i) => loadValue(pool, i, 1024));

  // The sidecar, and ebr's beside it on the same etcd, from before the write load until they have caught up.
  const port = await freePort();
  const stopSidecars = new AbortController();
  const sidecar = measure(
    process.execPath,
    [
      bin('snapshot', 'etcd-snapshot'),
      ...['run', '--endpoints', endpoint, '--store', `file://${storeDir}`, '--spool-dir', join(work, 'spool')],
      ...['--server-host', '127.0.0.1', '--server-port', String(port), '--delta-snapshot-period', '5s'],
      ...['--compression', compression],
    ],
    { signal: stopSidecars.signal },
  );
  const ebrStoreDir = join(work, 'ebr-sidecar', 'store');
  const ebrSnapshot = ebrCommand('snapshot', ebrStoreDir, { endpoint });
  const ebrSidecar = ebrSnapshot && measure(ebrSnapshot.bin, ebrSnapshot.args, { signal: stopSidecars.signal });
  const fullRevision = Number((await client.kv.range({ key: Buffer.from([0]), limit: 1 })).header.revision);
  await until("the sidecar's first full snapshot", async () => (await storeReaches(storeDir)) >= fullRevision);
  if (ebrSidecar)
    await until("ebr's first full snapshot", async () => (await storeReaches(ebrStoreDir)) >= fullRevision);
  const written = await writeLoad(endpoint, { perSecond: rate, count: revisions, keys: over, valueSize: 1024 });
  const loadEnded = Date.now();
  const last = (await memberStatus({ endpoints: cluster.endpoints })).revision;
  await until("the sidecar's deltas to reach the last revision", async () => (await storeReaches(storeDir)) >= last);
  const caughtUp = (Date.now() - loadEnded) / 1000;
  let ebrCaughtUp = '';
  if (ebrSidecar) {
    await until("ebr's deltas to reach the last revision", async () => (await storeReaches(ebrStoreDir)) >= last);
    ebrCaughtUp = `, ebr ${((Date.now() - loadEnded) / 1000).toFixed(1)} s`;
  }
  stopSidecars.abort();
  const ours = await sidecar;
  const own = ours.processes.get('etcd-snapshot (main)')?.rssMb ?? 0;
  rows.push({
    program: 'etcd-snapshot run (sidecar)',
    ours,
    reference: ebrSidecar ? 'ebr snapshot' : undefined,
    theirs: await ebrSidecar,
    result: `${Math.round(written.writes / written.seconds)} writes/s; caught up ${caughtUp.toFixed(1)} s after${ebrCaughtUp}; sidecar alone ${own.toFixed(0)} MB`,
  });
  if (written.errors > 0) wrong.push(`${written.errors} puts of the write load failed`);
  source = await keyspaceFingerprint(client, last);
  await writeFile(join(work, 'source.json'), JSON.stringify(source));

  const etcdctlFile = join(work, 'etcdctl.db');
  const etcdctlSave = await measureEtcdctlSave(endpoint, etcdctlFile);
  const save = await measureSave(endpoint, join(work, 'save-store'), 'zstd');
  rows.push({
    program: 'etcd-snapshot save',
    ours: save,
    reference: 'etcdctl snapshot save',
    theirs: etcdctlSave,
    result: `db ${(etcdctlSave.bytes / 1e6).toFixed(0)} MB → ${(save.bytes / 1e6).toFixed(0)} MB zstd`,
  });
} finally {
  await cluster.stop(); // nothing else runs while the programs are measured
}

try {
  const compactStore = join(work, 'compact-store');
  await cp(storeDir, compactStore, { recursive: true });
  const ebrStore = join(work, 'ebr-store');
  if (process.env.EBR_BIN) await cp(storeDir, ebrStore, { recursive: true });

  const restoredDir = join(work, 'restored');
  const restore = await measureRestore({ storeDir, dataDir: restoredDir });
  const reference = await measure(
    'etcdctl',
    ['snapshot', 'restore', join(work, 'etcdctl.db'), `--data-dir=${join(work, 'etcdctl-restored')}`],
    {
      env: { ETCDCTL_API: '3' },
    },
  );
  const chain = (await listSnapshots(new LocalStore(storeDir))).length;
  if (!same(restore.fingerprint, source)) wrong.push('etcd-restore: the restored keyspace differs from the source');
  rows.push({
    program: 'etcd-restore (full + deltas)',
    ours: restore.run,
    reference: 'etcdctl snapshot restore (full at the same revision)',
    theirs: reference,
    result: restore.fingerprint
      ? `${chain} objects; ${same(restore.fingerprint, source) ? 'keyspace = source' : 'KEYSPACE DIFFERS'}`
      : failure(restore.run),
  });
  await pushEbrRow(
    'etcd-restore (full + deltas)',
    'ebr restore',
    ebrCommand('restore', ebrStore, { dataDir: join(work, 'ebr-restored') }),
  );

  // The bad write found from the store alone: one key's history read from the whole chain (every delta, and the
  // full snapshot's state), which should cost no more than restoring that chain (docs/restore.md).
  const logged = await measureLog(storeDir, revisions, over);
  if (logged.wrong) wrong.push(`etcd-restore log: ${logged.wrong}`);
  rows.push({
    program: 'etcd-restore log --prefix (one key)',
    ours: logged.run,
    reference: 'etcd-restore (full + deltas)',
    theirs: restore.run,
    result: logged.wrong ? 'WRONG ROWS' : logged.result,
  });

  const compaction = await measureCompaction(compactStore, work);
  const compactDir = join(work, 'restored-compacted');
  const afterCompaction = compaction.result
    ? await measureRestore({ storeDir: compactStore, dataDir: compactDir })
    : undefined;
  if (!same(afterCompaction?.fingerprint, source))
    wrong.push('etcd-compact: the compacted snapshot restores to a keyspace that differs from the source');
  const ebrCompact = ebrCommand('compact', ebrStore, { dir: join(work, 'ebr-compact') });
  if (ebrCompact) await mkdir(join(work, 'ebr-compact', 'tmp'), { recursive: true });
  rows.push({
    program: 'etcd-compact',
    ours: compaction.run,
    reference: ebrCompact ? 'ebr compact' : undefined,
    theirs: ebrCompact && (await measure(ebrCompact.bin, ebrCompact.args)),
    result: compaction.result
      ? `${compaction.result.revisionsFolded} revisions folded; ${same(afterCompaction?.fingerprint, source) ? 'restores = source' : 'RESTORES DIFFERENTLY'}`
      : failure(compaction.run),
  });
  if (afterCompaction) rows.push({ program: 'etcd-restore (compacted full)', ours: afterCompaction.run, result: '' });

  for (const mode of ['sanity', 'full']) {
    const run = await measure(process.execPath, [
      bin('validate', 'etcd-validate'),
      'check',
      '--mode',
      mode,
      '--data-dir',
      restoredDir,
      '--output',
      'json',
    ]);
    if (run.code !== 0)
      wrong.push(`etcd-validate check --mode ${mode} finds the restored data dir unsound (exit ${run.code})`);
    rows.push({
      program: `etcd-validate check --mode ${mode}`,
      ours: run,
      result: run.code === 0 ? 'sound' : `exit ${run.code}`,
    });
  }

  // ebr's default policy, with the store's deltas all younger than the retention period: a plan that keeps all
  const gc = await measure(process.execPath, [
    bin('gc', 'etcd-gc'),
    ...['--store', `file://${storeDir}`, '--dry-run', '--output', 'json'],
    ...['--garbage-collection-policy', 'Exponential', '--delta-snapshot-retention-period', '24h'],
  ]);
  if (gc.code !== 0) wrong.push(`etcd-gc --dry-run failed: ${failure(gc)}`);
  rows.push({
    program: 'etcd-gc --dry-run',
    ours: gc,
    result: gc.code === 0 ? `${JSON.parse(gc.stdout).objects.length} objects decided` : failure(gc),
  });

  const copyDir = join(work, 'copy');
  const copy = await measure(process.execPath, [
    bin('copy-backups', 'etcd-copy-backups'),
    '--from',
    `file://${storeDir}`,
    '--to',
    `file://${copyDir}`,
  ]);
  const cpRun = await measure('cp', ['-r', storeDir, join(work, 'cp')]);
  const copied = (await listSnapshots(new LocalStore(copyDir)).catch(() => [])).length;
  if (copied !== chain) wrong.push(`etcd-copy-backups: ${copied} of ${chain} objects at the destination`);
  rows.push({
    program: 'etcd-copy-backups local → local',
    ours: copy,
    reference: 'cp -r',
    theirs: cpRun,
    result: `${copied} of ${chain} objects`,
  });
  await pushEbrRow(
    'etcd-copy-backups local → local',
    'ebr copy',
    ebrCommand('copy', join(work, 'ebr-copy'), {
      from: storeDir,
      to: join(work, 'ebr-copy'),
      dir: join(work, 'ebr-copy-work'),
    }),
  );

  const s3Copies = await measureS3Copies(storeDir, work, chain);
  rows.push(...s3Copies.rows);
  wrong.push(...s3Copies.wrong);
} finally {
  if (values.keep) {
    // the dataset stays; what the programs made of it goes
    for (const made of ['compact-store', 'ebr-store', 'restored', 'etcdctl-restored', 'ebr-restored'])
      await rm(join(work, made), { recursive: true, force: true });
    for (const made of [
      'restored-compacted',
      'copy',
      'cp',
      'ebr-copy',
      'ebr-copy-work',
      'ebr-compact',
      'save-store',
      's3',
      's3-down',
    ])
      await rm(join(work, made), { recursive: true, force: true });
  } else {
    await rm(work, { recursive: true, force: true });
  }
}

const s = (m?: Measurement) => (m ? m.seconds.toFixed(2) : '');
const mb = (m?: Measurement) => (m ? m.peakRssMb.toFixed(0) : '');
const ratio = (a?: number, b?: number) => (a !== undefined && b ? `${(a / b).toFixed(2)}x` : '');
console.log('');
printTable([
  ['program', 's', 'peak MB', 'reference', 'ref s', 'ref peak MB', 'time ratio', 'memory ratio', 'result'],
  ...rows.map((r) => [
    r.program,
    s(r.ours),
    mb(r.ours),
    r.reference ?? '-',
    s(r.theirs),
    mb(r.theirs),
    ratio(r.ours?.seconds, r.theirs?.seconds),
    ratio(r.ours?.peakRssMb, r.theirs?.peakRssMb),
    r.result,
  ]),
]);
console.log('peak MB: the peak RSS of the whole process tree (a program and any etcd or child process it starts).');
if (!process.env.EBR_BIN) console.log("ebr's rows: set EBR_BIN to etcdbrctl.");
if (wrong.length > 0) {
  for (const w of wrong) console.error(`WRONG RESULT: ${w}`);
  process.exit(1);
}
