// etcd-snapshot run (the sidecar) under a steady write load: its peak RSS, and the delta lag from a write
// to the moment its delta is in the store. Usage (after `pnpm exec tsc -b`):
//   node scripts/bench/sidecar.ts [--rate 10000] [--seconds 30] [--value-size 1024] [--period 20s] [--memory-limit 10Mi]
//     [--sidecar-node-options=--max-semi-space-size=4]
// Target (issue #4): 10,000 writes/s of 1 KiB values with bounded memory; the writer reports what it reaches.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
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
import { startCluster } from '@etcd-steward/core/testing';
import { printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '30' },
    'value-size': { type: 'string', default: '1024' },
    period: { type: 'string', default: '20s' },
    'memory-limit': { type: 'string', default: '10Mi' },
    // e.g. --sidecar-node-options=--max-semi-space-size=4 (V8's young generation: memory against CPU)
    'sidecar-node-options': { type: 'string', default: '' },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const valueSize = Number(values['value-size']);
const root = new URL('../..', import.meta.url).pathname;
const work = await mkdtemp(join(tmpdir(), 'bench-sidecar-'));
const storeDir = join(work, 'store');
const cluster = await startCluster();
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const sidecar = spawn(
  process.execPath,
  [
    join(root, 'packages/snapshot/bin/etcd-snapshot.js'),
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
  ],
  {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, NODE_OPTIONS: values['sidecar-node-options'] },
  },
);

const rssMb = () => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${sidecar.pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
};
const metric = async (name: string, labels = '') => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
};
const waitFor = async (what: string, probe: () => Promise<boolean>, ms = 120_000) => {
  const deadline = Date.now() + ms;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

try {
  await waitFor(
    'the first full snapshot',
    async () => (await metric('etcdbr_snapshot_latest_revision', 'kind="Full"')) > 0,
  );
  await sleep(1_000);
  const idleRss = rssMb();
  let peakRss = idleRss;
  let maxWatchLag = 0;
  let maxSpool = 0;
  let maxBuffered = 0;
  let maxHeap = 0;
  let maxExternal = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMb())), 50);
  const scraper = setInterval(async () => {
    maxWatchLag = Math.max(maxWatchLag, await metric('etcd_snapshot_watch_lag_revisions').catch(() => 0));
    maxSpool = Math.max(maxSpool, await metric('etcd_snapshot_spool_deltas').catch(() => 0));
    maxBuffered = Math.max(maxBuffered, await metric('etcd_snapshot_buffered_bytes').catch(() => 0));
    maxHeap = Math.max(maxHeap, await metric('nodejs_heap_size_used_bytes').catch(() => 0));
    maxExternal = Math.max(maxExternal, await metric('nodejs_external_memory_bytes').catch(() => 0));
  }, 1_000);

  console.log(`writing ${rate}/s of ${valueSize}-byte values for ${seconds}s…`);
  const written = await writeLoad(cluster.endpoints[0], rate, seconds, valueSize);
  const lastRevision = (await memberStatus({ endpoints: cluster.endpoints })).revision;
  const loadEnded = Date.now();
  await waitFor(
    'the deltas to reach the last revision',
    async () => (await metric('etcdbr_snapshot_latest_revision', 'kind="Incr"')) >= lastRevision,
  );
  const drainSeconds = (Date.now() - loadEnded) / 1000;
  clearInterval(sampler);
  clearInterval(scraper);
  sidecar.kill('SIGTERM');
  await new Promise((resolve) => sidecar.once('exit', resolve));

  const lags = await deltaLags(new LocalStore(storeDir));
  const entries = await listSnapshots(new LocalStore(storeDir));
  const deltas = entries.filter((e) => e.kind === 'Incr');
  const pct = (p: number) =>
    (lags.sorted[Math.min(lags.sorted.length - 1, Math.floor((p / 100) * lags.sorted.length))] / 1000).toFixed(1);
  printTable([
    ['measure', 'value'],
    ['target writes/s (1 revision each)', String(rate)],
    ['writes/s reached (etcd, this machine)', String(Math.round(written.writes / written.seconds))],
    ['write errors', String(written.errors)],
    ['events in deltas', String(lags.sorted.length)],
    ['deltas / stored MB', `${deltas.length} / ${(deltas.reduce((s, d) => s + d.size, 0) / 1e6).toFixed(1)}`],
    ['sidecar RSS idle, MB', idleRss.toFixed(0)],
    ['sidecar RSS peak under load, MB', peakRss.toFixed(0)],
    ['max JS heap used / external (buffers), MB', `${(maxHeap / 1e6).toFixed(0)} / ${(maxExternal / 1e6).toFixed(0)}`],
    ['max buffered delta JSON, MB', (maxBuffered / 1e6).toFixed(1)],
    ['max watch lag, revisions', String(maxWatchLag)],
    ['max spooled deltas', String(maxSpool)],
    [
      'delta lag write→stored p50 / p99 / max, s',
      `${pct(50)} / ${pct(99)} / ${(lags.sorted.at(-1)! / 1000).toFixed(1)}`,
    ],
    ['last delta stored after load ended, s', drainSeconds.toFixed(1)],
  ]);
} finally {
  if (sidecar.exitCode === null) sidecar.kill('SIGKILL');
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}

/**
 * Puts at `perSecond` over one HTTP/2 connection (raw gRPC: a light client, so that the writer is not what
 * limits the rate), each value starting with its write time in ms for the lag.
 */
async function writeLoad(endpoint: string, perSecond: number, secs: number, size: number) {
  const session = http2.connect(endpoint);
  // Values as Kubernetes objects look: half repetitive structure, half unique; no two alike.
  const pool = randomBytes(1 << 20).toString('base64');
  const maxInFlight = 512;
  let inFlight = 0;
  let writes = 0;
  let errors = 0;
  let sent = 0;
  const started = Date.now();
  const put = (i: number) => {
    const key = Buffer.from(`/bench/${String(i % 100_000).padStart(6, '0')}`);
    const stamp = `${Date.now()}|`;
    const body = `{"kind":"ConfigMap","metadata":{"name":"cm-${i}","namespace":"ns-${i % 100}"},"data":"`;
    const at = (i * 7919) % (pool.length - size);
    const value = Buffer.from((stamp + body + pool.slice(at, at + size)).slice(0, size));
    const message = Buffer.concat([field(1, key), field(2, value)]);
    const frame = Buffer.alloc(5);
    frame.writeUInt32BE(message.length, 1);
    inFlight++;
    const req = session.request({
      ':method': 'POST',
      ':path': '/etcdserverpb.KV/Put',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status: string | undefined;
    req.on('trailers', (t) => (status = String(t['grpc-status'])));
    req.on('response', (h) => (status ??= h['grpc-status'] === undefined ? undefined : String(h['grpc-status'])));
    req.on('data', () => {});
    req.on('close', () => {
      inFlight--;
      if (status === '0') writes++;
      else errors++;
    });
    req.on('error', () => {});
    req.end(Buffer.concat([frame, message]));
  };
  while (Date.now() - started < secs * 1000) {
    const due = Math.floor(((Date.now() - started) / 1000) * perSecond);
    while (sent < due && inFlight < maxInFlight) put(sent++);
    await sleep(2);
  }
  while (inFlight > 0) await sleep(5);
  session.close();
  return { writes, errors, seconds: (Date.now() - started) / 1000 };
}

function field(n: number, bytes: Buffer): Buffer {
  const varint = (v: number) => {
    const out: number[] = [];
    while (v >= 0x80) {
      out.push((v & 0x7f) | 0x80);
      v >>>= 7;
    }
    out.push(v);
    return Buffer.from(out);
  };
  return Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
}

/** For every benchmark event in the deltas: when its delta was stored (file time) minus when it was written. */
async function deltaLags(store: LocalStore): Promise<{ sorted: number[] }> {
  const lags: number[] = [];
  for (const entry of (await listSnapshots(store)).filter((e) => e.kind === 'Incr')) {
    const storedAt = (await store.stat(entry.name))!.lastModified.getTime();
    const decoder = new DeltaDecoder(entry.name);
    const done = pipeline(await store.get(entry.name), decompressor(entry.compression), decoder);
    for await (const e of decoder as AsyncIterable<DeltaEvent>) {
      const stamp = Number(e.value.subarray(0, 13).toString());
      if (e.key.toString().startsWith('/bench/') && stamp > 0) lags.push(storedAt - stamp);
    }
    await done;
  }
  return { sorted: lags.sort((a, b) => a - b) };
}
