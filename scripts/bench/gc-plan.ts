// etcd-gc --dry-run on file:// stores of 10,000 to 100,000 snapshot objects: wall time and peak RSS of the
// planning (listing, the newest full verified, every object decided, the JSON report printed).
// Target (issue #13): a store of 100,000 snapshot objects planned in under 5 s, memory bounded by the number of
// objects.
//
// The store is what a sidecar leaves after about 3 weeks: a delta every 20 s (one revision each) and a full
// every hour, ending a minute ago. The newest full is a real snapshot of a real etcd at that revision (it is
// verified); the older objects are empty files under their names (a dry run reads no object but the newest full).
//
// Usage: node scripts/bench/gc-plan.ts [--objects 10000,50000,100000] [--runs 3] [--dir /tmp/bench-gc]
// Build first (pnpm exec tsc -b). On a shared machine: flock /tmp/etcd-steward-bench.lock node scripts/bench/gc-plan.ts
import { existsSync } from 'node:fs';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LocalStore, snapshotName, takeFullSnapshot } from '@etcd-steward/core';
import { withMember } from '@etcd-steward/testing';
import { measure, median, printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    objects: { type: 'string', default: '10000,50000,100000' },
    runs: { type: 'string', default: '3' },
    dir: { type: 'string', default: '/tmp/bench-gc' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log('Usage: node scripts/bench/gc-plan.ts [--objects 10000,50000,100000] [--runs 3] [--dir /tmp/bench-gc]');
  process.exit(0);
}
const sizes = values.objects.split(',').map(Number);
const runs = Number(values.runs);
const root = new URL('../..', import.meta.url).pathname;
const DELTA_SECONDS = 20;
const FULL_EVERY = 180; // deltas: one full an hour

/** A store of about `objects` objects, built once and reused. */
async function buildStore(objects: number): Promise<string> {
  const dir = join(values.dir, `store-${objects}`);
  if (await stat(join(dir, 'complete')).catch(() => undefined)) return dir;
  await rm(dir, { recursive: true, force: true });
  await mkdir(values.dir, { recursive: true });
  const deltas = Math.round((objects * FULL_EVERY) / (FULL_EVERY + 1));
  const end = Math.floor(Date.now() / 1000) - 60;
  const start = end - deltas * DELTA_SECONDS;
  // the newest full: a real etcd brought to the revision the deltas reach
  // etcd 3.4 fsyncs every write: on tmpfs that costs nothing
  const etcdDir = join(existsSync('/dev/shm') ? '/dev/shm' : values.dir, `bench-gc-etcd-${objects}`);
  await rm(etcdDir, { recursive: true, force: true }); // what an interrupted build left
  const revision = await withMember(join(etcdDir, 'data'), async (client, endpoint) => {
    const puts = Array.from({ length: 64 }, async (_, w) => {
      for (let i = w; i < deltas; i += 64) await client.put(`/bench/${i % 1000}`).value(String(i));
    });
    await Promise.all(puts);
    const saved = await takeFullSnapshot({
      connection: { endpoints: [endpoint] },
      store: new LocalStore(dir),
      compression: 'none',
      tempDir: values.dir,
      now: () => new Date(end * 1000),
    });
    return saved.revision;
  });
  await rm(etcdDir, { recursive: true, force: true });
  await mkdir(join(dir, 'v2'), { recursive: true });
  const names: string[] = [];
  for (let r = 2; r <= revision; r++) {
    const createdAt = start + (r - 1) * DELTA_SECONDS;
    names.push(
      snapshotName({ kind: 'Incr', startRevision: r, lastRevision: r, createdAt, compression: '.zst', final: false }),
    );
    if (r % FULL_EVERY === 0 && r < revision) {
      names.push(
        snapshotName({
          kind: 'Full',
          startRevision: 0,
          lastRevision: r,
          createdAt: createdAt + 1,
          compression: '.zst',
          final: false,
        }),
      );
    }
  }
  for (let i = 0; i < names.length; i += 500) {
    await Promise.all(names.slice(i, i + 500).map((name) => writeFile(join(dir, name), '')));
  }
  await writeFile(join(dir, 'complete'), `${names.length + 1}\n`);
  return dir;
}

const rows = [['objects', 'seconds (median)', 'peak RSS MB (max)', 'target']];
for (const objects of sizes) {
  const dir = await buildStore(objects);
  const results: { seconds: number; peakRssMb: number }[] = [];
  let decided = 0;
  for (let i = 0; i <= runs; i++) {
    const m = await measure(process.execPath, [
      join(root, 'packages/gc/bin/etcd-gc.js'),
      ...['--store', `file://${dir}`, '--dry-run', '--output', 'json'],
      ...[
        '--garbage-collection-policy',
        'Exponential',
        '--keep-daily',
        '7',
        '--delta-snapshot-retention-period',
        '24h',
      ],
    ]);
    if (m.code !== 0) throw new Error(`etcd-gc exited ${m.code}: ${m.stderr}`);
    const report = JSON.parse(m.stdout) as { objects: unknown[] };
    decided = report.objects.length;
    if (i > 0) results.push(m); // the first run warms the page cache
  }
  rows.push([
    String(decided),
    median(results.map((r) => r.seconds)).toFixed(2),
    Math.max(...results.map((r) => r.peakRssMb)).toFixed(0),
    decided >= 100_000 ? '< 5 s' : '',
  ]);
}
printTable(rows);
