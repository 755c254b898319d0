// etcd-validate check, sanity and full mode, and bootstrap on the same sound data dir (what an init container
// costs when there is nothing to do), on a data dir of ~1 GB: wall time and peak RSS.
// Usage: node scripts/bench/validate.ts [--keys 1000000] [--runs 3] [--data-dir /tmp/bench-validate/data]
// Targets (issue #12): sanity mode under 1 s and 100 MB peak RSS on ~1 GB.
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
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
member, since loading takes minutes; keep it outside the repo), stops it, then runs etcd-validate check in
sanity and full mode and etcd-validate bootstrap (sanity, an empty local store) --runs times each,
interleaved; prints median seconds and peak RSS. The first run of each
mode warms the page cache and is not counted. Build first (pnpm exec tsc -b).`);
  process.exit(0);
}
const keys = Number(values.keys);
const runs = Number(values.runs);
const dataDir = values['data-dir'];
const root = new URL('../..', import.meta.url).pathname;

if (!(await stat(join(dataDir, 'member')).catch(() => undefined))) {
  console.log(`loading ${keys} keys of 1 KiB into ${dataDir}…`);
  await withMember(dataDir, (client) => loadConfigMaps(client, keys, (i) => Buffer.from(`${i}:`.padEnd(1024, 'x'))));
}
const dbBytes = (await stat(join(dataDir, 'member/snap/db'))).size;
const segments = (await readdir(join(dataDir, 'member/wal'))).filter((n) => n.endsWith('.wal')).length;

const emptyStore = await mkdtemp(join(tmpdir(), 'bench-validate-store-'));
const commands = {
  sanity: ['check', '--mode', 'sanity'],
  full: ['check', '--mode', 'full'],
  'bootstrap (sanity, valid)': ['bootstrap', '--mode', 'sanity', '--store', `file://${emptyStore}`],
};
const modes = Object.keys(commands) as Array<keyof typeof commands>;
const results = new Map<string, Array<{ seconds: number; peakRssMb: number }>>();
for (let i = 0; i <= runs; i++) {
  for (const mode of modes) {
    const m = await measure(process.execPath, [
      join(root, 'packages/validate/bin/etcd-validate.js'),
      ...commands[mode],
      '--data-dir',
      dataDir,
      '--output',
      'json',
    ]);
    if (m.code !== 0) throw new Error(`etcd-validate ${mode} exited ${m.code}: ${m.stdout} ${m.stderr}`);
    if (i > 0) results.set(mode, [...(results.get(mode) ?? []), m]);
  }
}
console.log(`\ndb ${(dbBytes / 1e6).toFixed(0)} MB, ${segments} WAL segments, ${runs} runs each (after one warm-up)`);
const rows = [['mode', 'seconds (median)', 'peak RSS MB (max)']];
for (const mode of modes) {
  const rs = results.get(mode) ?? [];
  rows.push([mode, median(rs.map((r) => r.seconds)).toFixed(2), Math.max(...rs.map((r) => r.peakRssMb)).toFixed(0)]);
}
printTable(rows);
await rm(emptyStore, { recursive: true, force: true });
