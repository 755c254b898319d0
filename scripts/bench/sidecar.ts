// etcd-snapshot run (the sidecar) under a steady write load: its memory (peak RSS, split into anonymous memory and
// file-backed pages, and the JS heap's generations), its CPU, and the delta lag from a write to the moment its
// delta is in the store. Usage (after `pnpm exec tsc -b`):
//   node scripts/bench/sidecar.ts [--rate 10000] [--seconds 30] [--value-size 1024] [--period 20s] [--memory-limit 10Mi]
//     [--sidecar-node-options='--max-semi-space-size=64 …'] [--cgroup-limit 100Mi [--cgroup-parent DIR]] [--full]
//     [--baseline DIR]
// --baseline DIR runs the sidecar built in DIR (a checkout of an earlier build) instead: run both in turn to compare.
// With --full, once the deltas have caught up, a full snapshot of the database the load built is taken through the
// HTTP API, and the sidecar's memory while it runs is reported on its own.
// With --cgroup-limit the sidecar runs in a memory cgroup (v1) of that limit, created under --cgroup-parent (default:
// this process's memory cgroup) and removed afterwards: what Kubernetes does with a container's memory limit.
// Target (issue #4): 10,000 writes/s of 1 KiB values with bounded memory; the writer reports what it reaches.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import {
  DeltaDecoder,
  type DeltaEvent,
  decompressor,
  freePort,
  LocalStore,
  listSnapshots,
  memberStatus,
} from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { peakOf, printTable, residentMemory, treeMemory } from './measure.ts';
import { type CgroupReport, createMemoryCgroup, parseMemoryQuantity } from './memory-cgroup.ts';
import { writeLoad } from './write-load.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '30' },
    'value-size': { type: 'string', default: '1024' },
    period: { type: 'string', default: '20s' },
    'memory-limit': { type: 'string', default: '10Mi' },
    // Node and V8 flags on the sidecar's command line, where they override the sidecar's own (process-settings.ts)
    'sidecar-node-options': { type: 'string', default: '' },
    'cgroup-limit': { type: 'string' },
    'cgroup-parent': { type: 'string' },
    full: { type: 'boolean', default: false },
    // A checkout of an earlier build (built), whose sidecar runs instead: the reference for a change.
    baseline: { type: 'string' },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const valueSize = Number(values['value-size']);
const root = new URL('../..', import.meta.url).pathname;
const work = await mkdtemp(join(tmpdir(), 'bench-sidecar-'));
const storeDir = join(work, 'store');
const loadBefore = loadavg();
const cluster = await startCluster();
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const cgroup = values['cgroup-limit']
  ? createMemoryCgroup(parseMemoryQuantity(values['cgroup-limit']), values['cgroup-parent'])
  : undefined;
const command = [
  process.execPath,
  ...values['sidecar-node-options'].split(' ').filter(Boolean),
  join(values.baseline ?? root, 'packages/snapshot/bin/etcd-snapshot.js'),
  'run',
  '--endpoints',
  cluster.endpoints[0],
  '--store',
  `file://${storeDir}`,
  '--spool-dir',
  join(work, 'spool'),
  '--server-host',
  '127.0.0.1',
  '--server-port',
  String(port),
  '--delta-snapshot-period',
  values.period,
  '--delta-snapshot-memory-limit',
  values['memory-limit'],
];
// In the cgroup from its first instruction, as in a container: Node sizes its heap by the limit it sees at start.
const [program, args] = cgroup ? cgroup.wrap(command[0], command.slice(1)) : [command[0], command.slice(1)];
const sidecar = spawn(program, args, { stdio: ['ignore', 'ignore', 'inherit'], env: process.env });
const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
  sidecar.once('exit', (code, signal) => resolve({ code, signal })),
);

/** The sidecar's resident memory: in all, anonymous (heap, buffers, malloc) and file-backed (node's code). */
const residentMb = () => {
  const now = sidecar.pid === undefined ? undefined : residentMemory(sidecar.pid);
  if (!now) throw new Error('the sidecar is gone');
  return now;
};
/** CPU seconds the sidecar has used (user + system). */
const cpuSeconds = () => {
  const fields = readFileSync(`/proc/${sidecar.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const metrics = async () => await (await fetch(`${url}/metrics`)).text();
/** One sample of a scrape; 0 when absent. */
const sample = (text: string, name: string, labels = '') => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
};
const metric = async (name: string, labels = '') => sample(await metrics(), name, labels);
const waitFor = async (what: string, probe: () => Promise<boolean>, ms = 120_000) => {
  const deadline = Date.now() + ms;
  while (!(await probe().catch(() => false))) {
    if (sidecar.exitCode !== null || sidecar.signalCode !== null) throw new Error(`the sidecar exited: no ${what}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};
const mb = (bytes: number) => (bytes / 1048576).toFixed(0);

let sampler: NodeJS.Timeout | undefined;
let scraper: NodeJS.Timeout | undefined;
try {
  await waitFor(
    'the first full snapshot',
    async () => (await metric('etcdbr_snapshot_latest_revision', 'kind="Full"')) > 0,
  );
  await sleep(1_000);
  const idle = residentMb();
  let peak = { ...idle };
  // With the processes it starts (a full snapshot's): what the pod's memory limit counts.
  let treePeak = { ...idle };
  const max = { watchLag: 0, spool: 0, buffered: 0, heap: 0, external: 0, newSpace: 0, oldSpace: 0 };
  sampler = setInterval(() => {
    let now: ReturnType<typeof residentMb>;
    try {
      cgroup?.sample();
      now = residentMb();
    } catch {
      return; // the sidecar is gone (killed by the cgroup's OOM killer?): the run reports it
    }
    peak = peakOf(peak, now);
    const tree = sidecar.pid === undefined ? undefined : treeMemory(sidecar.pid);
    if (tree) treePeak = peakOf(treePeak, tree);
  }, 50);
  scraper = setInterval(async () => {
    const text = await metrics().catch(() => '');
    const high = (key: keyof typeof max, name: string, labels = '') =>
      (max[key] = Math.max(max[key], sample(text, name, labels)));
    high('watchLag', 'etcd_snapshot_watch_lag_revisions');
    high('spool', 'etcd_snapshot_spool_deltas');
    high('buffered', 'etcd_snapshot_buffered_bytes');
    high('heap', 'nodejs_heap_size_used_bytes');
    high('external', 'nodejs_external_memory_bytes');
    high('newSpace', 'nodejs_heap_space_size_total_bytes', 'space="new"');
    high('oldSpace', 'nodejs_heap_space_size_total_bytes', 'space="old"');
  }, 1_000);

  console.log(`writing ${rate}/s of ${valueSize}-byte values for ${seconds}s…`);
  const cpuBefore = cpuSeconds();
  const written = await writeLoad(cluster.endpoints[0], { perSecond: rate, seconds, valueSize, stamp: true });
  const cpuUnderLoad = cpuSeconds() - cpuBefore;
  const lastRevision = (await memberStatus({ endpoints: cluster.endpoints })).revision;
  const loadEnded = Date.now();
  await waitFor(
    'the deltas to reach the last revision',
    async () => (await metric('etcdbr_snapshot_latest_revision', 'kind="Incr"')) >= lastRevision,
  );
  const drainSeconds = (Date.now() - loadEnded) / 1000;
  const text = await metrics();
  const loadPeak = peak;
  let full: string[][] = [];
  const loadTreePeak = treePeak;
  if (values.full) {
    peak = residentMb();
    treePeak = peak;
    const started = Date.now();
    const response = await fetch(`${url}/snapshot/full`, { method: 'POST' }).catch((err: Error) => err);
    if (!(response instanceof Response) || response.status !== 200) {
      const exit = sidecar.exitCode ?? sidecar.signalCode;
      const reason = response instanceof Response ? await response.text() : response.message;
      throw new Error(`the full snapshot failed${exit === null ? '' : ` (the sidecar exited: ${exit})`}: ${reason}`);
    }
    const seconds = (Date.now() - started) / 1000;
    const stored = (await response.json()) as { snapName: string };
    full = [
      [
        'full snapshot through the API: seconds / stored MB',
        `${seconds.toFixed(1)} / ${(((await new LocalStore(storeDir).stat(`v2/${stored.snapName}`))?.size ?? 0) / 1e6).toFixed(1)}`,
      ],
      [
        'sidecar RSS peak during it: all / anon / file, MiB',
        `${peak.rssMb.toFixed(0)} / ${peak.anonMb.toFixed(0)} / ${peak.fileMb.toFixed(0)}`,
      ],
      ['sidecar and its children: RSS peak during it, MiB', treePeak.rssMb.toFixed(0)],
    ];
    peak = loadPeak;
    treePeak = loadTreePeak;
  }
  clearInterval(sampler);
  clearInterval(scraper);
  const gc = (kind: string) =>
    `${sample(text, 'nodejs_gc_duration_seconds_count', `kind="${kind}"`)} / ${sample(
      text,
      'nodejs_gc_duration_seconds_sum',
      `kind="${kind}"`,
    ).toFixed(1)} s`;
  sidecar.kill('SIGTERM');
  const exit = await exited;
  const loadAfter = loadavg();

  const lags = await deltaLags(new LocalStore(storeDir));
  const entries = await listSnapshots(new LocalStore(storeDir));
  const deltas = entries.filter((e) => e.kind === 'Incr');
  const pct = (p: number) =>
    (lags.sorted[Math.min(lags.sorted.length - 1, Math.floor((p / 100) * lags.sorted.length))] / 1000).toFixed(1);
  printTable([
    ['measure', 'value'],
    ['load average before / after (1 min)', `${loadBefore[0].toFixed(2)} / ${loadAfter[0].toFixed(2)}`],
    ['target writes/s (1 revision each)', String(rate)],
    ['writes/s reached (etcd, this machine)', String(Math.round(written.writes / written.seconds))],
    ['write errors', String(written.errors)],
    ['events in deltas', String(lags.sorted.length)],
    ['deltas / stored MB', `${deltas.length} / ${(deltas.reduce((s, d) => s + d.size, 0) / 1e6).toFixed(1)}`],
    [
      'sidecar RSS idle: all / anon / file, MiB',
      `${idle.rssMb.toFixed(0)} / ${idle.anonMb.toFixed(0)} / ${idle.fileMb.toFixed(0)}`,
    ],
    [
      'sidecar RSS peak: all / anon / file, MiB',
      `${peak.rssMb.toFixed(0)} / ${peak.anonMb.toFixed(0)} / ${peak.fileMb.toFixed(0)}`,
    ],
    ['sidecar and its children: RSS peak, MiB', treePeak.rssMb.toFixed(0)],
    ['max JS heap used / new space / old space, MiB', `${mb(max.heap)} / ${mb(max.newSpace)} / ${mb(max.oldSpace)}`],
    ['max external memory (buffers), MiB', mb(max.external)],
    ['GCs minor / major: count / time', `${gc('minor')}, ${gc('major')}`],
    ['sidecar CPU under load, % of a core', ((100 * cpuUnderLoad) / written.seconds).toFixed(0)],
    ['max delta JSON not yet in a finished delta, MB', (max.buffered / 1e6).toFixed(1)],
    ['max watch lag, revisions', String(max.watchLag)],
    ['max spooled deltas', String(max.spool)],
    [
      'delta lag write→stored p50 / p99 / max, s',
      `${pct(50)} / ${pct(99)} / ${(lags.sorted.at(-1)! / 1000).toFixed(1)}`,
    ],
    ['last delta stored after load ended, s', drainSeconds.toFixed(1)],
    ['deltas that fail to decompress', lags.unreadable.length ? lags.unreadable.join('; ') : 'none'],
    ['sidecar exit', exit.signal ?? String(exit.code)],
    ...full,
    ...(cgroup ? cgroupRows(cgroup.report()) : []),
  ]);
} catch (err) {
  if (cgroup) console.error(cgroupRows(cgroup.report()).at(-1)!.join(': '));
  throw err;
} finally {
  clearInterval(sampler);
  clearInterval(scraper);
  if (sidecar.exitCode === null && sidecar.signalCode === null) sidecar.kill('SIGKILL');
  await cluster.stop();
  cgroup?.remove();
  await rm(work, { recursive: true, force: true });
}

function cgroupRows(r: CgroupReport): string[][] {
  return [
    ['cgroup limit, MiB', r.limitMb.toFixed(0)],
    ['cgroup peak usage (with page cache), MiB', r.maxUsageMb.toFixed(0)],
    ['cgroup peak anonymous memory (sampled), MiB', r.peakAnonMb.toFixed(0)],
    ['cgroup times at the limit / OOM kills', `${r.failcnt} / ${r.oomKills}`],
  ];
}

/** For every benchmark event in the deltas: when its delta was stored (file time) minus when it was written. */
async function deltaLags(store: LocalStore): Promise<{ sorted: number[]; unreadable: string[] }> {
  const lags: number[] = [];
  const unreadable: string[] = [];
  for (const entry of (await listSnapshots(store)).filter((e) => e.kind === 'Incr')) {
    const storedAt = (await store.stat(entry.name))!.lastModified.getTime();
    const decoder = new DeltaDecoder(entry.name);
    const done = pipeline(await store.get(entry.name), decompressor(entry.compression), decoder);
    try {
      for await (const e of decoder as AsyncIterable<DeltaEvent>) {
        const stamp = Number(e.value.subarray(0, 13).toString());
        if (e.key.toString().startsWith('/bench/') && stamp > 0) lags.push(storedAt - stamp);
      }
      await done;
    } catch (err) {
      await done.catch(() => {});
      unreadable.push(`${entry.name} (${entry.size} bytes): ${(err as Error).message}`);
    }
  }
  return { sorted: lags.sort((a, b) => a - b), unreadable };
}
