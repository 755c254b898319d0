// etcd-copy-backups copying ~1 GB of full snapshots from one store to another, against the slower side's
// single-stream rate (one object read from the source; one written to the destination), with the copy's peak RSS;
// then, interleaved for --rounds rounds, ours beside ebr's `copy` (when EBR_BIN names ebr's etcdbrctl) between two
// buckets of the source's S3 server (with --from s3: ours has the server copy, issue #42) and between two local
// directories (with `cp -r` and, with --previous, another checkout of this repo, built, and its copy).
// Usage: node scripts/bench/copy.ts [--from s3] [--to azure] [--size-mb 1024] [--keys 100000] [--max-parallel 10]
//                                   [--work /tmp/bench-copy] [--previous <checkout>] [--rounds 1]
// Targets: the copy at 80% or more of the slower side's single-stream rate, memory bounded (issue #15); local →
// local ≤ 2.5× ebr's time, S3 → S3 on one server ≤ 0.5× ebr's at ≤ 100 MB (issue #42).
// The snapshots are one real etcd snapshot (--keys puts of 1 KiB, uncompressed, so that 1 GB of objects is 1 GB
// to check) stored under as many names as make --size-mb. Build first (pnpm exec tsc -b).
import { createReadStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { LocalStore, listSnapshots, openStore, snapshotName, takeFullSnapshot } from '@etcd-steward/core';
import { withMember } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { ebrCommand } from './ebr.ts';
import { measure, printTable } from './measure.ts';
import { startTarget, type Target } from './store-targets.ts';

const { values } = parseArgs({
  options: {
    from: { type: 'string', default: 's3' },
    to: { type: 'string', default: 'azure' },
    'size-mb': { type: 'string', default: '1024' },
    keys: { type: 'string', default: '100000' },
    'max-parallel': { type: 'string', default: '10' },
    work: { type: 'string', default: '/tmp/bench-copy' },
    previous: { type: 'string' },
    rounds: { type: 'string', default: '1' },
  },
});
const work = values.work;
const root = new URL('../..', import.meta.url).pathname;
const bin = join(root, 'packages/copy-backups/bin/etcd-copy-backups.js');
const MB = 1e6;

// One real snapshot, kept between runs (loading takes minutes).
const seedDir = join(work, 'seed');
const seed = new LocalStore(seedDir);
if ((await listSnapshots(seed)).length === 0) {
  console.log(`loading ${values.keys} keys of 1 KiB into an etcd and taking a full snapshot…`);
  await withMember(join(work, 'etcd', 'data'), async (client, endpoint) => {
    await loadConfigMaps(client, Number(values.keys), (i) => Buffer.from(`${i}:`.padEnd(1024, 'x')));
    await takeFullSnapshot({ connection: { endpoints: [endpoint] }, store: seed, compression: 'none', tempDir: work });
  });
}
const [snapshot] = await listSnapshots(seed);
const copies = Math.ceil((Number(values['size-mb']) * MB) / snapshot.size);
const totalBytes = copies * snapshot.size;
const seedFile = join(seedDir, snapshot.name);
const metadata = (await seed.stat(snapshot.name))?.metadata ?? {};

async function fill(url: string): Promise<void> {
  const store = await openStore(url, { allowMissingFolder: true }); // a writer: a local folder is made by the first put
  for (let i = 0; i < copies; i++) {
    const name = snapshotName({ ...snapshot, createdAt: snapshot.createdAt + i });
    await store.put(name, createReadStream(seedFile), { metadata });
  }
  await store.close?.();
}

/** One object read from `url` start to end, in MB/s. */
async function readRate(url: string): Promise<number> {
  const store = await openStore(url);
  const [first] = await listSnapshots(store);
  const started = performance.now();
  await pipeline(await store.get(first.name), new Writable({ write: (_c, _e, done) => done() }));
  await store.close?.();
  return first.size / MB / ((performance.now() - started) / 1000);
}

/** One object written to `url`, in MB/s. */
async function writeRate(url: string): Promise<number> {
  const store = await openStore(url);
  const started = performance.now();
  await store.put(snapshot.name, createReadStream(seedFile), { metadata });
  const seconds = (performance.now() - started) / 1000;
  await store.delete(snapshot.name);
  await store.close?.();
  return snapshot.size / MB / seconds;
}

async function target(provider: string, name: string): Promise<Target> {
  const dir = join(work, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const t = await startTarget(provider, dir, '5MiB', '2', ['copies']); // the stores' defaults
  Object.assign(process.env, t.env);
  return t;
}

const rows = [['run', 'objects', 'MB', 'seconds', 'MB/s', 'of the slower side', 'peak RSS MB', 'CPU s']];
const from = await target(values.from, 'from');
const to = await target(values.to, 'to');
try {
  console.log(`storing ${copies} × ${(snapshot.size / MB).toFixed(0)} MB in ${values.from}…`);
  await fill(from.url);
  const sourceRate = await readRate(from.url);
  const destinationRate = await writeRate(to.url);
  const slower = Math.min(sourceRate, destinationRate);
  rows.push([
    `read one object (${values.from})`,
    '1',
    (snapshot.size / MB).toFixed(0),
    '',
    sourceRate.toFixed(0),
    '',
    '',
    '',
  ]);
  rows.push([
    `write one object (${values.to})`,
    '1',
    (snapshot.size / MB).toFixed(0),
    '',
    destinationRate.toFixed(0),
    '',
    '',
    '',
  ]);
  const run = await measure(process.execPath, [
    ...[bin, '--from', from.url, '--to', to.url, '--max-parallel', values['max-parallel'], '--output', 'json'],
  ]);
  if (run.code !== 0) throw new Error(`etcd-copy-backups exited ${run.code}: ${run.stderr.slice(-2000)}`);
  const summary = JSON.parse(run.stdout);
  if (summary.copied !== copies) throw new Error(`copied ${summary.copied} of ${copies}`);
  const rate = totalBytes / MB / run.seconds;
  rows.push([
    `etcd-copy-backups ${values.from} → ${values.to}`,
    String(copies),
    (totalBytes / MB).toFixed(0),
    run.seconds.toFixed(1),
    rate.toFixed(0),
    `${((100 * rate) / slower).toFixed(0)}%`,
    run.peakRssMb.toFixed(0),
    run.cpuSeconds.toFixed(2),
  ]);

  // Two buckets of the source's S3 server: ours has the server copy what a recorded sha256 proves; ebr streams.
  if (from.urlIn) await interleave('S3 → S3 (one server)', from.url, (run) => from.urlIn!('copies', run), from.env);

  // Between two directories: ours, `cp -r`, the previous version's and ebr's copy, each into a folder of its own.
  const localFrom = join(work, 'local-from');
  await rm(localFrom, { recursive: true, force: true });
  await fill(`file://${localFrom}`);
  await interleave('local → local', `file://${localFrom}`, (run) => `file://${join(work, `local-${run}`)}`, {});
} finally {
  await from.stop();
  await to.stop();
}
console.log(
  `\n${copies} full snapshots of ${(snapshot.size / MB).toFixed(0)} MB (uncompressed), --max-parallel ${values['max-parallel']}`,
);
printTable(rows);

/**
 * Ours, and beside it in each of --rounds rounds ebr's copy (given EBR_BIN), the previous version's (--previous)
 * and, between two directories, `cp -r`: each from `source` to `destination(run)`, emptied before it runs.
 */
async function interleave(
  label: string,
  source: string,
  destination: (run: string) => string,
  env: Record<string, string>,
): Promise<void> {
  const local = source.startsWith('file://');
  const path = (url: string) => new URL(url).pathname;
  const s3Parts = (url: string) => ({ container: new URL(url).host, prefix: path(url).slice(1) });
  const ebr = ebrCommand(local ? 'copy' : 'copy_s3', '', {
    ...(local
      ? { from: path(source), to: path(destination('ebr')) }
      : {
          ...{ from: s3Parts(source).container, fromPrefix: s3Parts(source).prefix },
          ...{ to: s3Parts(destination('ebr')).container, toPrefix: s3Parts(destination('ebr')).prefix },
        }),
    dir: join(work, 'ebr'),
  });
  const previousBin = values.previous && join(values.previous, 'packages/copy-backups/bin/etcd-copy-backups.js');
  // [row name, command, arguments, destination run]
  const contenders: Array<[string, string, string[], string]> = [
    [`etcd-copy-backups ${label}`, process.execPath, [bin, '--from', source, '--to', destination('ours')], 'ours'],
  ];
  if (local) contenders.push([`cp -r ${label}`, 'cp', ['-r', path(source), path(destination('cp'))], 'cp']);
  if (previousBin) {
    const args = [previousBin, '--from', source, '--to', destination('previous')];
    contenders.push([`previous etcd-copy-backups ${label}`, process.execPath, args, 'previous']);
  }
  if (ebr) contenders.push([`ebr copy ${label}`, ebr.bin, ebr.args, 'ebr']);
  if (!ebr) rows.push([`ebr copy ${label}`, '', '', '', '', '', 'set EBR_BIN to etcdbrctl', '']);
  await mkdir(join(work, 'ebr', 'tmp'), { recursive: true });
  const sourceEnv = { ...env, SOURCE_AWS_APPLICATION_CREDENTIALS_JSON: env.AWS_APPLICATION_CREDENTIALS_JSON ?? '' };
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const [name, command, args, run] of contenders) {
      await empty(destination(run));
      const measured = await measure(command, args, { env: sourceEnv });
      if (measured.code !== 0) throw new Error(`${name} exited ${measured.code}: ${measured.stderr.slice(-2000)}`);
      const landed = await openStore(destination(run), { allowMissingFolder: true });
      const held = (await listSnapshots(landed)).length;
      await landed.close?.();
      if (held !== copies) throw new Error(`${name}: ${held} of ${copies} objects at the destination`);
      rows.push([
        name,
        String(copies),
        (totalBytes / MB).toFixed(0),
        measured.seconds.toFixed(2),
        (totalBytes / MB / measured.seconds).toFixed(0),
        '',
        measured.peakRssMb.toFixed(0),
        measured.cpuSeconds.toFixed(2),
      ]);
    }
  }
}

/** Removes every object of the store at `url` (a local folder: the folder). */
async function empty(url: string): Promise<void> {
  if (url.startsWith('file://')) return rm(new URL(url).pathname, { recursive: true, force: true });
  const store = await openStore(url, { allowMissingFolder: true });
  for (const object of await store.list()) await store.delete(object.name);
  await store.close?.();
}
