// The proof's hash (docs/proof.md) on a db of ~1 GB: etcd's HashKV computed from the db file (dbHashKV, what
// `verify --against` and `etcd-restore --verify-against` run on the restored db) against etcd computing its own
// (`etcdctl endpoint hashkv --rev`, the server side of the same hash), at the same revision and compaction, each
// with wall time; ours with its peak RSS. The two hashes must be equal.
// Usage: node scripts/bench/proof.ts [--keys 700000] [--runs 3] [--data-dir /tmp/bench-proof/data]
// Build first (pnpm exec tsc -b). On a shared machine: flock /tmp/etcd-steward-bench.lock node scripts/bench/proof.ts
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { compactHistory } from '@etcd-steward/core';
import { withMember } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { measure, median, printTable } from './measure.ts';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '700000' },
    runs: { type: 'string', default: '3' },
    'data-dir': { type: 'string', default: '/tmp/bench-proof/data' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/proof.ts [--keys 700000] [--runs 3] [--data-dir /tmp/bench-proof/data]
Writes --keys puts of 1 KiB into a one-member etcd on --data-dir, then overwrites a tenth of them and deletes a
hundredth, and compacts at the end of the first load (kept and reused when it already holds a member: loading takes
minutes; keep it outside the repo). Then, --runs times after a warm-up: etcdctl endpoint hashkv at the last
revision (etcd running on the data dir), and the same hash computed from the stopped member's db file.`);
  process.exit(0);
}
const keys = Number(values.keys);
const runs = Number(values.runs);
const dataDir = values['data-dir'];
const db = join(dataDir, 'member/snap/db');

if (!(await stat(join(dataDir, 'member')).catch(() => undefined))) {
  console.log(`loading ${keys} keys of 1 KiB into ${dataDir}…`);
  await withMember(dataDir, async (client, endpoint) => {
    await loadConfigMaps(client, keys, (i) => Buffer.from(`${i}:`.padEnd(1024, 'x')));
    const loaded = Number((await client.kv.range({ key: Buffer.from([0]), limit: 1 })).header.revision);
    await loadConfigMaps(client, Math.floor(keys / 10), (i) => Buffer.from(`again ${i}:`.padEnd(1024, 'y')));
    for (let i = 0; i < keys / 100; i++) await client.delete().key(`/registry/configmaps/ns-${i % 100}/cm-${i * 7}`);
    await compactHistory({ endpoints: [endpoint] }, loaded, { timeoutMs: 600_000 });
  });
}
const dbBytes = (await stat(db)).size;
const tmp = await mkdtemp(join(tmpdir(), 'bench-proof-'));

/** etcd's own hash at its revision, with the compaction it hashed as and the time the call took. */
async function etcdHash(): Promise<{ seconds: number; hash: number; revision: number; compactRevision: number }> {
  return withMember(dataDir, async (_client, endpoint) => {
    const { stdout: status } = await run('etcdctl', ['--endpoints', endpoint, 'endpoint', 'status', '-w', 'json']);
    const revision = Number(JSON.parse(status)[0].Status.header.revision);
    const started = performance.now();
    const { stdout } = await run('etcdctl', [
      '--endpoints',
      endpoint,
      'endpoint',
      'hashkv',
      '--rev',
      String(revision),
      '-w',
      'json',
    ]);
    const seconds = (performance.now() - started) / 1000;
    const answer = JSON.parse(stdout)[0].HashKV;
    return { seconds, hash: answer.hash, revision, compactRevision: Number(answer.compact_revision ?? 0) };
  });
}

const script = `import { dbHashKV } from '@etcd-steward/core';
const [db, revision, compactRevision, tmpDir] = process.argv.slice(1);
console.log(JSON.stringify(dbHashKV(db, { revision: Number(revision), compactRevision: Number(compactRevision), tmpDir })));`;

const etcdRuns: number[] = [];
const ours: Array<{ seconds: number; peakRssMb: number }> = [];
let rows = 0;
for (let i = 0; i <= runs; i++) {
  const live = await etcdHash();
  const m = await measure(process.execPath, [
    '--input-type=module',
    '-e',
    script,
    db,
    String(live.revision),
    String(live.compactRevision),
    tmp,
  ]);
  if (m.code !== 0) throw new Error(`dbHashKV exited ${m.code}: ${m.stderr}`);
  const mine = JSON.parse(m.stdout);
  if (mine.hash !== live.hash) throw new Error(`hashes differ: etcd ${live.hash}, db file ${mine.hash}`);
  rows = mine.rows;
  if (i === 0) {
    console.log(`revision ${live.revision}, compacted at ${live.compactRevision}: hash ${live.hash} both ways`);
    continue;
  }
  etcdRuns.push(live.seconds);
  ours.push(m);
}
await rm(tmp, { recursive: true, force: true });
console.log(
  `\ndb ${(dbBytes / 1e6).toFixed(0)} MB, ${rows} rows hashed, ${runs} runs each (after one warm-up), load ${loadavg()[0].toFixed(1)}`,
);
printTable([
  ['case', 'seconds (median)', 'peak RSS MB (max)'],
  ['etcdctl endpoint hashkv (etcd hashing its own db)', median(etcdRuns).toFixed(2), '—'],
  [
    'dbHashKV (the db file, no etcd)',
    median(ours.map((r) => r.seconds)).toFixed(2),
    Math.max(...ours.map((r) => r.peakRssMb)).toFixed(0),
  ],
]);
