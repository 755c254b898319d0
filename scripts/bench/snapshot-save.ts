// etcd-snapshot save (zstd, gzip) against `etcdctl snapshot save` on a ~250 MB database:
// wall time and peak RSS side by side. Usage: node scripts/bench/snapshot-save.ts [--keys 200000] [--runs 3]
// Targets (issue #2): within 1.3x of etcdctl's time with compression on; peak RSS under 150 MB.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startCluster } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { median, printTable } from './measure.ts';
import { measureEtcdctlSave, measureSave } from './save-run.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '3' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/snapshot-save.ts [--keys 200000] [--runs 3]
Loads --keys keys of 1 KiB into a fresh etcd on loopback, then runs etcdctl snapshot save and
etcd-snapshot save (zstd, gzip) --runs times each, interleaved; prints median seconds, the ratio to
etcdctl and the peak RSS of each process tree. Build first (pnpm exec tsc -b); on a shared machine
wrap it in flock so that benchmarks do not overlap.`);
  process.exit(0);
}
const keys = Number(values.keys);
const runs = Number(values.runs);
const work = await mkdtemp(join(tmpdir(), 'bench-snapshot-'));
// etcd's own quota (2 GiB) would stop a load past it; 8 GiB is the most etcd recommends.
const cluster = await startCluster({ etcdArgs: ['--quota-backend-bytes=8589934592'] });
try {
  const client = cluster.client();
  console.log(`loading ${keys} keys of 1 KiB (values half JSON-like, half random, as Kubernetes objects are)…`);
  await loadConfigMaps(client, keys, (i) => {
    const json = JSON.stringify({
      kind: 'ConfigMap',
      name: `cm-${i}`,
      labels: { app: `app-${i % 50}` },
      data: 'x'.repeat(300),
    });
    return Buffer.from(
      json +
        randomBytes(768)
          .toString('base64')
          .slice(0, Math.max(0, 1024 - json.length)),
    );
  });
  const endpoint = cluster.endpoints[0];
  const cases: Array<{
    name: string;
    run: (i: number) => Promise<{ seconds: number; peakRssMb: number; bytes: number }>;
  }> = [
    {
      name: 'etcdctl snapshot save',
      run: async (i) => {
        const file = join(work, `etcdctl-${i}.db`);
        const m = await measureEtcdctlSave(endpoint, file);
        await rm(file);
        return m;
      },
    },
    ...(['zstd', 'gzip'] as const).map((compression) => ({
      name: `etcd-snapshot save (${compression})`,
      run: async (i: number) => {
        const store = join(work, `store-${compression}-${i}`);
        const m = await measureSave(endpoint, store, compression);
        await rm(store, { recursive: true });
        return m;
      },
    })),
  ];
  const results = new Map<string, Array<{ seconds: number; peakRssMb: number; bytes: number }>>();
  // Interleaved runs, so that the shared machine's load falls on every case alike.
  for (let i = 0; i < runs; i++) {
    for (const c of cases) {
      const r = await c.run(i);
      results.set(c.name, [...(results.get(c.name) ?? []), r]);
    }
  }
  const reference = median(results.get('etcdctl snapshot save')!.map((r) => r.seconds));
  const rows = [['case', 'seconds (median)', 'x etcdctl', 'peak RSS MB (max)', 'output MB']];
  for (const c of cases) {
    const rs = results.get(c.name)!;
    const seconds = median(rs.map((r) => r.seconds));
    rows.push([
      c.name,
      seconds.toFixed(2),
      (seconds / reference).toFixed(2),
      Math.max(...rs.map((r) => r.peakRssMb)).toFixed(0),
      (rs[0].bytes / 1e6).toFixed(1),
    ]);
  }
  console.log(
    `\n${keys} keys, db ${(results.get('etcdctl snapshot save')![0].bytes / 1e6).toFixed(0)} MB, ${runs} runs each, etcd ${endpoint}`,
  );
  printTable(rows);
} finally {
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}
