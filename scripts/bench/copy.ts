// etcd-copy-backups copying ~1 GB of full snapshots from one store to another, against the slower side's
// single-stream rate (one object read from the source; one written to the destination), with the copy's peak RSS;
// and, when EBR_BIN names ebr's etcdbrctl, ebr's `copy` beside ours between two local directories.
// Usage: node scripts/bench/copy.ts [--from s3] [--to azure] [--size-mb 1024] [--keys 100000] [--max-parallel 10]
//                                   [--work /tmp/bench-copy] [--previous <checkout>] [--rounds 1]
// Between two local directories it also runs `cp -r` and, with --previous (another checkout of this repo, built),
// that version's copy, interleaved with ours for --rounds rounds.
// Target (issue #15): the copy at 80% or more of the slower side's single-stream rate, memory bounded.
// The snapshots are one real etcd snapshot (--keys puts of 1 KiB, uncompressed, so that 1 GB of objects is 1 GB
// to check) stored under as many names as make --size-mb. Build first (pnpm exec tsc -b).
import { createReadStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
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
  const t = await startTarget(provider, dir, '5MiB', '2'); // the stores' defaults
  Object.assign(process.env, t.env);
  return t;
}

const rows = [['run', 'objects', 'MB', 'seconds', 'MB/s', 'of the slower side', 'peak RSS MB']];
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
  ]);
  rows.push([
    `write one object (${values.to})`,
    '1',
    (snapshot.size / MB).toFixed(0),
    '',
    destinationRate.toFixed(0),
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
  ]);

  // Between two directories, ours and (given EBR_BIN) ebr's copy, which takes its stores by ebr's flags.
  const localFrom = join(work, 'local-from');
  const ours = join(work, 'local-ours');
  const theirs = join(work, 'local-ebr');
  await rm(localFrom, { recursive: true, force: true });
  await fill(`file://${localFrom}`);
  const previousBin = values.previous && join(values.previous, 'packages/copy-backups/bin/etcd-copy-backups.js');
  const contenders: Array<[string, string, string[]]> = [
    [
      'etcd-copy-backups local → local',
      process.execPath,
      [bin, '--from', `file://${localFrom}`, '--to', `file://${ours}`],
    ],
    ['cp -r local → local', 'cp', ['-r', localFrom, ours]],
    ...(previousBin
      ? [
          [
            'previous etcd-copy-backups local → local',
            process.execPath,
            [previousBin, '--from', `file://${localFrom}`, '--to', `file://${ours}`],
          ] as [string, string, string[]],
        ]
      : []),
  ];
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const [name, command, args] of contenders) {
      await rm(ours, { recursive: true, force: true });
      const run = await measure(command, args);
      if (run.code !== 0) throw new Error(`${name} exited ${run.code}: ${run.stderr.slice(-2000)}`);
      rows.push([
        name,
        String(copies),
        (totalBytes / MB).toFixed(0),
        run.seconds.toFixed(2),
        (totalBytes / MB / run.seconds).toFixed(0),
        '',
        run.peakRssMb.toFixed(0),
      ]);
    }
  }
  await rm(theirs, { recursive: true, force: true });
  const ebrCopy = ebrCommand('copy', theirs, { from: localFrom, to: theirs, dir: join(work, 'ebr') });
  if (ebrCopy) {
    const run = await measure(ebrCopy.bin, ebrCopy.args);
    const copied = (await stat(theirs).catch(() => undefined))
      ? (await listSnapshots(new LocalStore(theirs))).length
      : 0;
    rows.push([
      `ebr copy local → local${run.code === 0 ? '' : ` (exit ${run.code})`}`,
      String(copied),
      (totalBytes / MB).toFixed(0),
      run.seconds.toFixed(1),
      (totalBytes / MB / run.seconds).toFixed(0),
      '',
      run.peakRssMb.toFixed(0),
    ]);
  } else {
    rows.push(['ebr copy local → local', '', '', '', '', '', 'set EBR_BIN to etcdbrctl']);
  }
} finally {
  await from.stop();
  await to.stop();
}
console.log(
  `\n${copies} full snapshots of ${(snapshot.size / MB).toFixed(0)} MB (uncompressed), --max-parallel ${values['max-parallel']}`,
);
printTable(rows);
