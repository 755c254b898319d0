// etcd-validate check, sanity and full mode, and bootstrap on the same sound data dir (what an init container
// costs when there is nothing to do), on a data dir of ~1 GB: wall time and peak RSS; beside them the keyspace
// read from the db file on a pass of its own (dbKeyspace; etcd-restore's default verification takes the rows
// from the full check's pass instead).
// Usage: node scripts/bench/validate.ts [--keys 1000000] [--runs 3] [--data-dir /tmp/bench-validate/data]
// Targets (issue #12): sanity mode under 1 s and 100 MB peak RSS on ~1 GB.
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { withMember } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { measure, median, printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '3' },
    'data-dir': { type: 'string', default: '/tmp/bench-validate/data' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/validate.ts [--keys 1000000] [--runs 3] [--data-dir /tmp/bench-validate/data]
Writes --keys puts of 1 KiB into a one-member etcd on --data-dir (kept, and reused when it already holds a
member, since loading takes minutes; keep it outside the repo; etcd takes a raft snapshot every 2,000 entries,
so member/snap holds .snap files), stops it, then runs etcd-validate check in sanity and full mode, etcd-validate bootstrap
(sanity, an empty local store) and the
keyspace fingerprint read from the db file, --runs times each, interleaved; prints median seconds and peak RSS.
The first run of each warms the page cache and is not counted. Build first (pnpm exec tsc -b).`);
  process.exit(0);
}
const keys = Number(values.keys);
const runs = Number(values.runs);
const dataDir = values['data-dir'];
const root = new URL('../..', import.meta.url).pathname;

if (!(await stat(join(dataDir, 'member')).catch(() => undefined))) {
  console.log(`loading ${keys} keys of 1 KiB into ${dataDir}…`);
  await withMember(dataDir, (client) => loadConfigMaps(client, keys, (i) => Buffer.from(`${i}:`.padEnd(1024, 'x'))), [
    '--snapshot-count=2000',
  ]);
}
const dbBytes = (await stat(join(dataDir, 'member/snap/db'))).size;
const segments = (await readdir(join(dataDir, 'member/wal'))).filter((n) => n.endsWith('.wal')).length;

const snaps = (await readdir(join(dataDir, 'member/snap'))).filter((n) => n.endsWith('.snap')).length;
const keyspaceTmp = await mkdtemp(join(tmpdir(), 'bench-db-keyspace-'));
// The restore's verification reads the keyspace from the db file after the full check: alone here, so that its
// own time and memory show.
const keyspaceScript = `import { dbKeyspace } from '@etcd-steward/core';
console.log(JSON.stringify(dbKeyspace(process.argv[1], { tmpDir: process.argv[2] })));`;
const emptyStore = await mkdtemp(join(tmpdir(), 'bench-validate-store-'));
const validate = (args: string[]) =>
  measure(process.execPath, [
    join(root, 'packages/validate/bin/etcd-validate.js'),
    ...args,
    '--data-dir',
    dataDir,
    '--output',
    'json',
  ]);
const cases: Record<string, () => ReturnType<typeof measure>> = {
  sanity: () => validate(['check', '--mode', 'sanity']),
  full: () => validate(['check', '--mode', 'full']),
  'bootstrap (sanity, valid)': () => validate(['bootstrap', '--mode', 'sanity', '--store', `file://${emptyStore}`]),
  'db keyspace (restore)': () =>
    measure(process.execPath, [
      '--input-type=module',
      '-e',
      keyspaceScript,
      join(dataDir, 'member/snap/db'),
      keyspaceTmp,
    ]),
};
const results = new Map<string, Array<{ seconds: number; peakRssMb: number }>>();
for (let i = 0; i <= runs; i++) {
  for (const [name, run] of Object.entries(cases)) {
    const m = await run();
    if (m.code !== 0) throw new Error(`${name} exited ${m.code}: ${m.stdout} ${m.stderr}`);
    if (i === 1 && name.startsWith('db keyspace')) console.log(`db keyspace: ${m.stdout.trim()}`);
    if (i > 0) results.set(name, [...(results.get(name) ?? []), m]);
  }
}
await rm(keyspaceTmp, { recursive: true, force: true });
await rm(emptyStore, { recursive: true, force: true });
console.log(
  `\ndb ${(dbBytes / 1e6).toFixed(0)} MB, ${segments} WAL segments, ${snaps} .snap files, ${runs} runs each (after one warm-up), load ${loadavg()[0].toFixed(1)}`,
);
const rows = [['case', 'seconds (median)', 'peak RSS MB (max)']];
for (const name of Object.keys(cases)) {
  const rs = results.get(name) ?? [];
  rows.push([name, median(rs.map((r) => r.seconds)).toFixed(2), Math.max(...rs.map((r) => r.peakRssMb)).toFixed(0)]);
}
printTable(rows);
