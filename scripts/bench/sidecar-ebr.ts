// The sidecar's memory as a pod counts it, ours beside ebr's, in interleaved runs: each sidecar in a memory cgroup
// (v1) of its own, on an etcd of its own, through its first full snapshot and --puts single puts at --rate (a
// delta every 5 s) until its deltas reach the last revision. Reported per run: the peak anonymous memory of the
// group (memory.stat rss, sampled every 10 ms: what a memory limit cannot reclaim) and the peak RSS.
// Target (issue 42): ours ≤ 0.8× ebr's in every run, not in the median alone.
// Usage: EBR_BIN=/path/to/etcdbrctl node scripts/bench/sidecar-ebr.ts [--runs 5] [--puts 100000] [--rate 3600]
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, memberStatus } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { ebrCommand } from './ebr.ts';
import { type Measurement, measure, printTable } from './measure.ts';
import { storeReaches, until } from './store-progress.ts';
import { loadValue, valuePool, writeLoad } from './write-load.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    puts: { type: 'string', default: '100000' },
    rate: { type: 'string', default: '3600' },
    base: { type: 'string', default: '10000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help || !process.env.EBR_BIN) {
  console.log(`Usage: EBR_BIN=/path/to/etcdbrctl node scripts/bench/sidecar-ebr.ts [--runs 5] [--puts 100000]
  [--rate 3600] [--base 10000]
Per run, ours and ebr's sidecar in turn (the order alternating), each on a fresh etcd holding --base ConfigMaps of
1 KiB, in a memory cgroup of its own (1 GiB limit): the first full snapshot, then --puts puts of 1 KiB over 10,000
keys at --rate a second, until the deltas (every 5 s) reach the last revision. Prints each run's peak anonymous
memory of the group and peak RSS, and the ratio of ours to ebr's. Build first (pnpm exec tsc -b).`);
  process.exit(values.help ? 0 : 2);
}
const runs = Number(values.runs);
const root = new URL('../..', import.meta.url).pathname;
const LIMIT = 2 ** 30;

/** One sidecar through the load, measured in its cgroup. */
async function runSidecar(who: 'ours' | 'ebr'): Promise<Measurement> {
  const work = await mkdtemp(join(tmpdir(), `bench-sidecar-${who}-`));
  const storeDir = join(work, 'store');
  const cluster = await startCluster();
  try {
    const endpoint = cluster.endpoints[0];
    const pool = valuePool();
    await loadConfigMaps(cluster.client(), Number(values.base), (i) => loadValue(pool, i, 1024));
    const base = (await memberStatus({ endpoints: [endpoint] })).revision;
    const ebr = ebrCommand('snapshot', storeDir, { endpoint })!;
    const [command, args] =
      who === 'ebr'
        ? [ebr.bin, ebr.args]
        : [
            process.execPath,
            [
              join(root, 'packages/snapshot/bin/etcd-snapshot.js'),
              ...['run', '--endpoints', endpoint, '--store', `file://${storeDir}`, '--spool-dir', join(work, 'spool')],
              ...['--server-host', '127.0.0.1', '--server-port', String(await freePort())],
              ...['--delta-snapshot-period', '5s'],
            ],
          ];
    const stop = new AbortController();
    const run = measure(command, args, { memoryLimitBytes: LIMIT, signal: stop.signal });
    await until('the first full snapshot', async () => (await storeReaches(storeDir)) >= base);
    await writeLoad(endpoint, { perSecond: Number(values.rate), count: Number(values.puts), valueSize: 1024 });
    const last = (await memberStatus({ endpoints: [endpoint] })).revision;
    await until('the deltas to reach the last revision', async () => (await storeReaches(storeDir)) >= last);
    stop.abort();
    return await run;
  } finally {
    await cluster.stop();
    await rm(work, { recursive: true, force: true });
  }
}

console.log(`${runs} runs, ${values.puts} puts at ${values.rate}/s; load ${loadavg()[0].toFixed(1)}`);
const rows: string[][] = [['run', 'ours anon MB', 'ebr anon MB', 'anon ratio', 'ours RSS MB', 'ebr RSS MB']];
const ratios: number[] = [];
for (let i = 1; i <= runs; i++) {
  const order = i % 2 === 1 ? (['ours', 'ebr'] as const) : (['ebr', 'ours'] as const);
  const m: Partial<Record<'ours' | 'ebr', Measurement>> = {};
  for (const who of order) m[who] = await runSidecar(who);
  const anon = (who: 'ours' | 'ebr') => m[who]!.cgroup!.peakAnonMb;
  ratios.push(anon('ours') / anon('ebr'));
  rows.push([
    String(i),
    anon('ours').toFixed(1),
    anon('ebr').toFixed(1),
    `${ratios.at(-1)!.toFixed(2)}x`,
    m.ours!.peakRssMb.toFixed(0),
    m.ebr!.peakRssMb.toFixed(0),
  ]);
  console.log(rows.at(-1)!.join('  '));
}
console.log('');
printTable(rows);
console.log(
  `worst ratio ${Math.max(...ratios).toFixed(2)}x (target ≤ 0.8x in every run); load now ${loadavg()[0].toFixed(1)}`,
);
