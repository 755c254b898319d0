// Where a local → local etcd-copy-backups spends its time: each part of a copy's work done alone over every
// object of a store, one object at a time in this process (listing, reading, hashing, decompressing and checking
// the content, writing), then the copy itself as a process with its peak RSS, `--check stored` and `--check
// content`, beside a program that only starts and exits (what loading Node and the library costs).
// `--before DIR` names the root of another built checkout, whose copy runs interleaved with this one's: on a
// shared machine, compare the two as ratios.
// Usage: node scripts/bench/copy-phases.ts --store DIR [--before DIR] [--rounds 3] [--work /tmp/bench-copy-phases]
// The suite's store (scripts/bench/run's sidecar: one full snapshot and its deltas, zstd) is the case of issue 32.
import { mkdir, rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { checkObject, decompressor, LocalStore, listSnapshots, objectMetadata, StoredDigest } from '@etcd-steward/core';
import { measure, printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    before: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    work: { type: 'string', default: '/tmp/bench-copy-phases' },
  },
});
if (!values.store) throw new Error('give --store DIR: a local store, e.g. one scripts/bench/run wrote');
const storeDir = values.store;
const rounds = Number(values.rounds);
const root = new URL('../..', import.meta.url).pathname;
const copyBin = (checkout: string) => join(checkout, 'packages/copy-backups/bin/etcd-copy-backups.js');
const discard = () => new Writable({ write: (_c, _e, done) => done() });
const MB = 1e6;

const store = new LocalStore(storeDir);
const entries = await listSnapshots(store);
const bytes = entries.reduce((n, e) => n + e.size, 0);

/** Seconds `work` takes over every object, one after another. */
async function timed(work: (entry: (typeof entries)[number]) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  for (const entry of entries) await work(entry);
  return (performance.now() - started) / 1000;
}

const phases: Array<[string, () => Promise<number>]> = [
  [
    'list both stores and read the metadata',
    async () => {
      const started = performance.now();
      await listSnapshots(new LocalStore(join(values.work, 'empty')));
      for (const entry of await listSnapshots(store)) await objectMetadata(store, entry);
      return (performance.now() - started) / 1000;
    },
  ],
  ['read the stored bytes', () => timed(async (e) => pipeline(await store.get(e.name), discard()))],
  [
    'read + sha256 of the stored bytes',
    () => timed(async (e) => pipeline(await store.get(e.name), new StoredDigest(), discard())),
  ],
  [
    'read + decompress',
    () => timed(async (e) => pipeline(await store.get(e.name), decompressor(e.compression), discard())),
  ],
  [
    'read + the full check (sha256, decompress, content trailer)',
    () =>
      timed(async (e) => {
        const check = checkObject(e, await objectMetadata(store, e), e.name);
        await pipeline(await store.get(e.name), check.input);
        return check.result;
      }),
  ],
  [
    'read + write into another local store (no check)',
    async () => {
      const to = new LocalStore(join(values.work, 'written'));
      const seconds = await timed(async (e) => to.put(e.name, await store.get(e.name)));
      await rm(join(values.work, 'written'), { recursive: true, force: true });
      return seconds;
    },
  ],
];

await mkdir(values.work, { recursive: true });
console.log(
  `${entries.length} objects, ${(bytes / MB).toFixed(1)} MB stored; ${rounds} rounds; load ${loadavg()[0].toFixed(1)}`,
);
const phaseRows = [['phase (in this process, one object at a time)', 'best s', 'MB/s']];
for (const [name, run] of phases) {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < rounds; i++) best = Math.min(best, await run());
  phaseRows.push([name, best.toFixed(3), (bytes / MB / best).toFixed(0)]);
}
printTable(phaseRows);

/** What each process run is: its name, and its arguments after node (a copy's --from and --to added). */
const runs: Array<{ name: string; args: string[]; copies: boolean }> = [
  { name: 'node start + --help (this build)', args: [copyBin(root), '--help'], copies: false },
  { name: 'copy, this build --check stored', args: [copyBin(root), '--check', 'stored'], copies: true },
  { name: 'copy, this build --check content', args: [copyBin(root), '--check', 'content'], copies: true },
];
if (values.before) runs.push({ name: 'copy, before', args: [copyBin(values.before)], copies: true });
const results = new Map<string, { seconds: number[]; peakMb: number[] }>();
for (let i = 0; i < rounds; i++) {
  // Interleaved, so that the machine's load falls on each alike.
  for (const { name, args, copies } of runs) {
    const to = join(values.work, 'copy');
    await rm(to, { recursive: true, force: true });
    const run = await measure(
      process.execPath,
      copies ? [...args, '--from', `file://${storeDir}`, '--to', `file://${to}`] : args,
    );
    if (run.code !== 0) throw new Error(`${name} exited ${run.code}: ${run.stderr.slice(-2000)}`);
    const r = results.get(name) ?? { seconds: [], peakMb: [] };
    r.seconds.push(run.seconds);
    r.peakMb.push(run.peakRssMb);
    results.set(name, r);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const reference = results.get(values.before ? 'copy, before' : 'copy, this build --check content');
const runRows = [['process', 'median s', 'peak RSS MB', `time ÷ ${values.before ? 'before' : '--check content'}`]];
for (const [name, r] of results) {
  runRows.push([
    name,
    median(r.seconds).toFixed(2),
    median(r.peakMb).toFixed(0),
    reference ? `${(median(r.seconds) / median(reference.seconds)).toFixed(2)}×` : '',
  ]);
}
console.log('');
printTable(runRows);
console.log(`load after: ${loadavg()[0].toFixed(1)}`);
await rm(values.work, { recursive: true, force: true });
