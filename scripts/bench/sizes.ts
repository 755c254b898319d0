// Every program on dbs of 1, 2 and 8 GiB (etcd's largest): time and peak memory of each against the db's size,
// beside ebr's (EBR_BIN) where it finishes within --ebr-limit, and etcdctl's or cp's where they do the same work.
// Memory must stay flat as the db grows, time grow no faster than the bytes. Exits 1 on a wrong result.
import { execFileSync } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, homedir, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type CompressionPolicy, type KeyspaceFingerprint, LocalStore, listSnapshots } from '@etcd-steward/core';
import { withMember } from '@etcd-steward/testing';
import { measureCompaction } from './compact-run.ts';
import { ebrCommand } from './ebr.ts';
import { type Measurement, measure, printTable } from './measure.ts';
import { failure, measureRestore } from './restore-run.ts';
import { measureEtcdctlSave, measureSave } from './save-run.ts';
import { ETCD_ARGS, type SizeDataset, sizeDataset } from './size-dataset.ts';
import { type Figures, plotSizes, type SizeResult } from './size-plot.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1,2,8' },
    dir: { type: 'string', default: join(homedir(), '.cache/etcd-steward/bench-sizes') },
    revisions: { type: 'string', default: '200000' },
    'ebr-limit': { type: 'string', default: '3600' },
    plot: { type: 'string', default: new URL('../../docs/performance-sizes.svg', import.meta.url).pathname },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/sizes.ts [--sizes 1,2,8] [--dir ~/.cache/etcd-steward/bench-sizes]
  [--revisions 200000] [--ebr-limit 3600] [--plot docs/performance-sizes.svg]
For each size (GiB): a one-member etcd whose db has grown to that size (ConfigMap-shaped keys of 4 KiB), its
sidecar's store (the full snapshot, then deltas over --revisions puts), built once in --dir and kept (about
--sizes × 3 GiB of disk; minutes to build at 8 GiB). Then, one at a time: etcd-snapshot save (beside etcdctl
snapshot save), etcd-restore of the full snapshot alone and of the full + deltas (beside ebr restore; each result's
keyspace held against the source's: read from an etcd started on it up to 2 GiB, above that from the restore's own
verification of the db file, since etcd's paged read of GiBs takes longer than the benchmark), etcd-validate check sanity and full on the member's
data dir, etcd-compact (beside ebr compact), etcd-copy-backups local → local (beside cp -r and ebr copy) and
etcd-gc --dry-run. ebr's runs (EBR_BIN=/path/to/etcdbrctl; the sidecar then writes gzip, which ebr reads) are
stopped after --ebr-limit seconds. Each size's figures are kept in --dir; the table and the plot (an SVG of time
and peak memory against the db's size) cover every size measured there so far. Build first (pnpm exec tsc -b).`);
  process.exit(0);
}
const sizes = values.sizes.split(',').map(Number);
const revisions = Number(values.revisions);
const ebrLimitMs = Number(values['ebr-limit']) * 1000;
const compression: CompressionPolicy = process.env.EBR_BIN ? 'gzip' : 'zstd';
const root = new URL('../..', import.meta.url).pathname;
const bin = (pkg: string, name: string) => join(root, 'packages', pkg, 'bin', `${name}.js`);
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const wrong: string[] = [];
const same = (a: KeyspaceFingerprint | undefined, b: KeyspaceFingerprint) =>
  a !== undefined && a.sha256 === b.sha256 && a.revision === b.revision;
const figures = (m: Measurement) => ({
  seconds: m.seconds,
  peakMb: m.peakRssMb,
  peakAnonMb: m.peakAnonMb,
  ok: m.code === 0,
});

/** ebr's run of `task`, stopped after the limit; undefined without EBR_BIN. */
async function ebr(task: Parameters<typeof ebrCommand>[0], storeDir: string, fill: Record<string, string>) {
  const command = ebrCommand(task, storeDir, fill);
  if (!command) return undefined;
  await mkdir(join(fill.dir ?? storeDir, 'tmp'), { recursive: true });
  const run = await measure(command.bin, command.args, { signal: AbortSignal.timeout(ebrLimitMs) });
  if (run.code !== 0) log(`ebr ${task}: ${run.signal ? `stopped after ${values['ebr-limit']} s` : failure(run)}`);
  return figures(run);
}

/** Every program on one dataset; what each made is removed before the next runs. */
async function measureSize(data: SizeDataset, work: string): Promise<SizeResult[]> {
  const results: SizeResult[] = [];
  const add = (program: string, ours: Measurement, extra: Partial<SizeResult> = {}) => {
    if (ours.code !== 0) wrong.push(`${program} at ${data.gib} GiB: ${failure(ours)}`);
    results.push({ gib: data.gib, dbBytes: data.dbBytes, program, ours: figures(ours), ...extra });
    log(`${data.gib} GiB ${program}: ${ours.seconds.toFixed(1)} s, ${ours.peakRssMb.toFixed(0)} MB`);
  };
  const scratch = (name: string) => join(work, name);

  const saved = await withMember(
    data.dataDir,
    async (_client, endpoint) => {
      const etcdctl = await measureEtcdctlSave(endpoint, scratch('etcdctl.db'));
      const ours = await measureSave(endpoint, scratch('save-store'), 'zstd');
      return { etcdctl, ours };
    },
    ETCD_ARGS,
  );
  add('etcd-snapshot save', saved.ours, { reference: { name: 'etcdctl snapshot save', ...figures(saved.etcdctl) } });
  await rm(scratch('etcdctl.db'), { force: true });
  await rm(scratch('save-store'), { recursive: true, force: true });

  for (const [program, storeDir, source] of [
    ['etcd-restore (full)', data.fullStoreDir, data.full],
    ['etcd-restore (full + deltas)', data.storeDir, data.last],
  ] as const) {
    const restored = await measureRestore({ storeDir, dataDir: scratch('restored'), startEtcd: data.gib <= 2 });
    if (restored.fingerprint && !same(restored.fingerprint, source))
      wrong.push(`${program} at ${data.gib} GiB: the restored keyspace differs from the source`);
    await rm(scratch('restored'), { recursive: true, force: true });
    const theirs = await ebr('restore', storeDir, { dataDir: scratch('ebr-restored') });
    await rm(scratch('ebr-restored'), { recursive: true, force: true });
    add(program, restored.run, { ebr: theirs });
  }

  for (const mode of ['sanity', 'full']) {
    const run = await measure(process.execPath, [
      bin('validate', 'etcd-validate'),
      ...['check', '--mode', mode, '--data-dir', data.dataDir, '--output', 'json'],
    ]);
    add(`etcd-validate check --mode ${mode}`, run);
  }

  // Compaction adds its snapshot to the store: each runs on a copy of its own (hard links; nothing is rewritten).
  const copyOf = (name: string) => {
    execFileSync('cp', ['-al', data.storeDir, scratch(name)]);
    return scratch(name);
  };
  const compaction = await measureCompaction(copyOf('compact-store'), work);
  const ebrCompaction = await ebr('compact', copyOf('ebr-compact-store'), { dir: scratch('ebr-compact') });
  add('etcd-compact', compaction.run, { ebr: ebrCompaction });
  for (const made of ['compact-store', 'ebr-compact-store', 'ebr-compact'])
    await rm(scratch(made), { recursive: true, force: true });
  for (const made of await readdir(work))
    if (made.startsWith('compact-work-')) await rm(scratch(made), { recursive: true });

  const chain = (await listSnapshots(new LocalStore(data.storeDir))).length;
  const copy = await measure(process.execPath, [
    bin('copy-backups', 'etcd-copy-backups'),
    ...['--from', `file://${data.storeDir}`, '--to', `file://${scratch('copy')}`],
  ]);
  const copied = (await listSnapshots(new LocalStore(scratch('copy'))).catch(() => [])).length;
  if (copied !== chain) wrong.push(`etcd-copy-backups at ${data.gib} GiB: ${copied} of ${chain} objects copied`);
  const cpRun = await measure('cp', ['-r', data.storeDir, scratch('cp')]);
  const ebrCopy = await ebr('copy', scratch('ebr-copy'), {
    ...{ from: data.storeDir, to: scratch('ebr-copy'), dir: scratch('ebr-copy-work') },
  });
  add('etcd-copy-backups local → local', copy, { reference: { name: 'cp -r', ...figures(cpRun) }, ebr: ebrCopy });
  for (const made of ['copy', 'cp', 'ebr-copy', 'ebr-copy-work'])
    await rm(scratch(made), { recursive: true, force: true });

  const gc = await measure(process.execPath, [
    bin('gc', 'etcd-gc'),
    ...['--store', `file://${data.storeDir}`, '--dry-run', '--output', 'json'],
    ...['--garbage-collection-policy', 'Exponential', '--delta-snapshot-retention-period', '24h'],
  ]);
  add('etcd-gc --dry-run', gc);
  return results;
}

log(`${cpus().length} CPUs, load ${loadavg()[0].toFixed(1)}; datasets in ${values.dir}; ${compression}`);
for (const gib of sizes) {
  const data = await sizeDataset(values.dir, gib, { revisions, compression, log });
  if (data.compression !== compression)
    throw new Error(`${data.gib} GiB was built ${data.compression}, this run needs ${compression}: remove it`);
  const work = join(values.dir, 'work');
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  try {
    const results = await measureSize(data, work);
    await writeFile(join(values.dir, `results-${gib}GiB.json`), JSON.stringify(results, null, 1));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

// The table and the plot: every size measured in --dir so far.
const all: SizeResult[] = [];
for (const name of (await readdir(values.dir)).filter((n) => /^results-.*\.json$/.test(n)).sort())
  all.push(...(JSON.parse(await readFile(join(values.dir, name), 'utf8')) as SizeResult[]));
all.sort((a, b) => a.gib - b.gib);
const cell = (f?: Figures) => {
  if (!f) return '-';
  if (!f.ok) return 'did not finish';
  const anon = f.peakAnonMb === undefined ? '' : ` (anon ${f.peakAnonMb.toFixed(0)})`;
  return `${f.seconds.toFixed(1)} s ${f.peakMb.toFixed(0)} MB${anon}`;
};
console.log('');
printTable([
  ['program', 'db GiB', 'ours', 'reference', 'ebr', 'time ratio to ebr'],
  ...all.map((r) => [
    r.program,
    (r.dbBytes / 2 ** 30).toFixed(2),
    cell(r.ours),
    r.reference ? `${r.reference.name}: ${cell(r.reference)}` : '-',
    cell(r.ebr),
    r.ebr?.ok ? `${(r.ours.seconds / r.ebr.seconds).toFixed(3)}x` : '',
  ]),
]);
await writeFile(values.plot, plotSizes(all));
console.log(`plot: ${values.plot}`);
if (wrong.length > 0) {
  for (const w of wrong) console.error(`WRONG RESULT: ${w}`);
  process.exit(1);
}
