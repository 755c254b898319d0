// Where the sidecar's memory goes over time, as a pod counts it: the anonymous memory of a memory cgroup (v1) of
// its own, sampled every 10 ms and printed every 20 ms for the first second and every 250 ms after, with the
// sidecar's log lines (and V8's, with --node-flags=--trace-gc) in the same timeline, through its first full
// snapshot and --puts puts of 1 KiB at --rate a second on an etcd holding --base ConfigMaps of 1 KiB. Ends with the
// peak and when it came. sidecar-ebr.ts measures the peak beside ebr's; this shows what makes it.
// Usage: node scripts/bench/sidecar-trace.ts [--puts 20000] [--rate 3600] [--base 10000] [--until 8]
//          [--node-flags "--trace-gc"]
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, memberStatus } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { createMemoryCgroup } from './memory-cgroup.ts';
import { storeReaches, until } from './store-progress.ts';
import { loadValue, valuePool, writeLoad } from './write-load.ts';

const { values } = parseArgs({
  options: {
    puts: { type: 'string', default: '20000' },
    rate: { type: 'string', default: '3600' },
    base: { type: 'string', default: '10000' },
    until: { type: 'string', default: '8' },
    'node-flags': { type: 'string', default: '' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/sidecar-trace.ts [--puts 20000] [--rate 3600] [--base 10000] [--until 8]
  [--node-flags "--trace-gc"]
The sidecar's anonymous memory (its own memory cgroup) and its log lines, in one timeline up to --until seconds,
then the peak. Build first (pnpm exec tsc -b).`);
  process.exit(0);
}
const root = new URL('../..', import.meta.url).pathname;
const work = await mkdtemp(join(tmpdir(), 'bench-sidecar-trace-'));
const storeDir = join(work, 'store');
const cluster = await startCluster();
const started = performance.now();
const seconds = () => (performance.now() - started) / 1000;
const timeline: Array<[number, string]> = [];
let group: ReturnType<typeof createMemoryCgroup> | undefined;
let child: ReturnType<typeof spawn> | undefined;
let sampler: NodeJS.Timeout | undefined;
try {
  const endpoint = cluster.endpoints[0];
  const pool = valuePool();
  await loadConfigMaps(cluster.client(), Number(values.base), (i) => loadValue(pool, i, 1024));
  const base = (await memberStatus({ endpoints: [endpoint] })).revision;
  group = createMemoryCgroup(2 ** 30);
  const sidecar = [
    ...values['node-flags'].split(' ').filter(Boolean),
    join(root, 'packages/snapshot/bin/etcd-snapshot.js'),
    ...['run', '--endpoints', endpoint, '--store', `file://${storeDir}`, '--spool-dir', join(work, 'spool')],
    ...['--server-host', '127.0.0.1', '--server-port', String(await freePort()), '--delta-snapshot-period', '5s'],
  ];
  const [command, args] = group.wrap(process.execPath, sidecar);
  const from = performance.now();
  const at = () => (performance.now() - from) / 1000;
  child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let partial = '';
  const onOutput = (data: Buffer) => {
    const lines = (partial + data).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) timeline.push([at(), `    ${line.slice(0, 150)}`]);
  };
  child.stdout?.on('data', onOutput);
  child.stderr?.on('data', onOutput);
  let peak = { mb: 0, at: 0 };
  let shown = -1;
  const sampled = group;
  sampler = setInterval(() => {
    const mb = sampled.sample() / 1048576;
    const t = at();
    if (mb > peak.mb) peak = { mb, at: t };
    const slot = t < 1 ? Math.floor(t / 0.02) : 50 + Math.floor((t - 1) / 0.25);
    if (slot !== shown) {
      shown = slot;
      timeline.push([t, `anon ${mb.toFixed(1)} MB`]);
    }
  }, 10);
  await until('the first full snapshot', async () => (await storeReaches(storeDir)) >= base);
  timeline.push([at(), '— the first full snapshot is stored; the writes start']);
  await writeLoad(endpoint, { perSecond: Number(values.rate), count: Number(values.puts), valueSize: 1024 });
  const last = (await memberStatus({ endpoints: [endpoint] })).revision;
  timeline.push([at(), '— the writes are done']);
  await until('the deltas to reach the last revision', async () => (await storeReaches(storeDir)) >= last);
  await stopSidecar(child);
  timeline.sort((a, b) => a[0] - b[0]);
  for (const [t, what] of timeline)
    if (t <= Number(values.until) || what.startsWith('—')) console.log(`${t.toFixed(2).padStart(6)} s  ${what}`);
  console.log(
    `peak ${peak.mb.toFixed(1)} MB of anonymous memory at ${peak.at.toFixed(2)} s (${seconds().toFixed(0)} s in all)`,
  );
} finally {
  clearInterval(sampler);
  if (child) await stopSidecar(child); // a run that failed leaves neither the sidecar nor its cgroup behind
  group?.remove();
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}

async function stopSidecar(sidecar: ReturnType<typeof spawn>): Promise<void> {
  if (sidecar.exitCode !== null || sidecar.signalCode !== null) return;
  const exited = new Promise((resolve) => sidecar.once('exit', resolve));
  sidecar.kill('SIGTERM');
  await exited;
}
