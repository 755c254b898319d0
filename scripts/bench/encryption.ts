// What client-side encryption (docs/encryption.md) adds: etcd-snapshot save and etcd-restore (a full snapshot
// plus deltas) with and without --encryption-key-file, wall time and peak RSS side by side; then the cipher and
// decipher streams alone over objects of growing size, each in a process of its own, to show that memory does not
// grow with object size. Target (issue #19): at most 15% more wall time on save and on restore.
//
// Usage: node scripts/bench/encryption.ts [--keys 100000] [--events 50000] [--runs 3] [--sizes 64,512,2048]
// Build first (pnpm exec tsc -b); on a shared machine: flock /tmp/etcd-steward-bench.lock node scripts/bench/...
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, LocalStore } from '@etcd-steward/core';
import { startCluster, storeDeltas, watchEvents } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { type Measurement, measure, median, printTable } from './measure.ts';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    events: { type: 'string', default: '50000' },
    runs: { type: 'string', default: '3' },
    sizes: { type: 'string', default: '64,512,2048' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(`Usage: node scripts/bench/encryption.ts [--keys 100000] [--events 50000] [--runs 3] [--sizes 64,512,2048]
Loads --keys keys of 1 KiB into a fresh etcd, runs etcd-snapshot save plain and encrypted --runs times each,
interleaved; writes --events more revisions as deltas after a plain full snapshot, copies that store encrypted
(etcd-copy-backups --encryption-key-file), and restores each --runs times, interleaved. Then encrypts and
decrypts --sizes MiB through the streams alone. Prints medians, the ratio to plain and peak RSS.`);
  process.exit(0);
}
const runs = Number(values.runs);
const root = new URL('../..', import.meta.url).pathname;
const bin = (pkg: string, name: string) => join(root, `packages/${pkg}/bin/${name}.js`);
const work = await mkdtemp(join(tmpdir(), 'bench-encryption-'));
const keyFile = join(work, 'keys');
await writeFile(keyFile, `bench ${randomBytes(32).toString('hex')}\n`, { mode: 0o400 });
const key = ['--encryption-key-file', keyFile];

async function run(command: string, args: string[]): Promise<Measurement> {
  const m = await measure(process.execPath, [command, ...args]);
  if (m.code !== 0) throw new Error(`${command} failed: ${m.stderr}`);
  return m;
}

/** Interleaved runs of each case, so that the shared machine's load falls on every case alike. */
async function compare(
  title: string,
  cases: Array<{ name: string; run: (i: number) => Promise<Measurement> }>,
): Promise<string[][]> {
  const results = new Map<string, Measurement[]>();
  for (let i = 0; i < runs; i++) {
    for (const c of cases) results.set(c.name, [...(results.get(c.name) ?? []), await c.run(i)]);
  }
  const plain = median(results.get(cases[0].name)!.map((m) => m.seconds));
  return cases.map((c) => {
    const ms = results.get(c.name)!;
    const seconds = median(ms.map((m) => m.seconds));
    return [
      title,
      c.name,
      seconds.toFixed(2),
      `${(((seconds - plain) / plain) * 100).toFixed(1)}%`,
      Math.max(...ms.map((m) => m.peakRssMb)).toFixed(0),
    ];
  });
}

const rows = [['operation', 'case', 'seconds (median)', 'added vs plain', 'peak RSS MB (max)']];
const cluster = await startCluster();
try {
  const client = cluster.client();
  const endpoint = cluster.endpoints[0];
  console.log(`loading ${values.keys} keys of 1 KiB…`);
  await loadConfigMaps(client, Number(values.keys), (i) =>
    Buffer.concat([Buffer.from(JSON.stringify({ kind: 'ConfigMap', name: `cm-${i}` })), randomBytes(990)]),
  );
  const save = (store: string, extra: string[]) => (i: number) =>
    run(bin('snapshot', 'etcd-snapshot'), [
      'save',
      '--endpoints',
      endpoint,
      '--store',
      `file://${store}-${i}`,
      ...extra,
    ]);
  rows.push(
    ...(await compare('etcd-snapshot save (zstd)', [
      { name: 'plain', run: save(join(work, 'save-plain'), []) },
      { name: 'encrypted', run: save(join(work, 'save-encrypted'), key) },
    ])),
  );

  const plainStore = join(work, 'chain-plain');
  const full = await run(bin('snapshot', 'etcd-snapshot'), [
    ...['save', '--endpoints', endpoint, '--store', `file://${plainStore}`, '--output', 'json'],
  ]);
  const base = JSON.parse(full.stdout).revision as number;
  const events = Number(values.events);
  for (let n = 0; n < events; n += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, events - n) }, (_, j) =>
        client.put(`/registry/configmaps/default/cm-${(n + j) % 20_000}`).value(randomBytes(600).toString('base64')),
      ),
    );
  }
  const last = base + events;
  const deltas = new LocalStore(plainStore);
  for (let from = base + 1; from <= last; from += 10_000) {
    const to = Math.min(last, from + 9_999);
    await storeDeltas(deltas, await watchEvents(client, from, to), { startRevision: from, compression: 'zstd' });
  }
  const encryptedStore = join(work, 'chain-encrypted');
  await run(bin('copy-backups', 'etcd-copy-backups'), [
    ...['--from', `file://${plainStore}`, '--to', `file://${encryptedStore}`, ...key],
  ]);
  const restore = (store: string, extra: string[]) => async (i: number) => {
    const dataDir = join(work, `restored-${i}`);
    const peer = `http://127.0.0.1:${await freePort()}`;
    const m = await run(bin('restore', 'etcd-restore'), [
      ...['--store', `file://${store}`, '--data-dir', dataDir, '--name', 'bench'],
      ...['--initial-advertise-peer-urls', peer, '--output', 'json', ...extra],
    ]);
    await rm(dataDir, { recursive: true, force: true });
    return m;
  };
  await cluster.stop(); // nothing else runs while restores are measured
  rows.push(
    ...(await compare(`etcd-restore (full + ${events} revisions)`, [
      { name: 'plain', run: restore(plainStore, []) },
      { name: 'encrypted', run: restore(encryptedStore, key) },
    ])),
  );

  // The streams alone, a process per size: peak RSS must stay flat as the object grows.
  const core = join(root, 'packages/core/dist/index.js');
  for (const mib of values.sizes.split(',').map(Number)) {
    const script = `
      import { ObjectCipher, ObjectDecipher, parseKeyFile } from ${JSON.stringify(core)};
      import { Readable, Writable } from 'node:stream';
      import { pipeline } from 'node:stream/promises';
      const keys = parseKeyFile('bench ' + '11'.repeat(32), 'bench');
      const block = Buffer.alloc(1 << 20, 7);
      let bytes = 0;
      await pipeline(
        Readable.from((function* () { for (let i = 0; i < ${mib}; i++) yield block; })()),
        new ObjectCipher(keys.current, 'bench'),
        new ObjectDecipher(keys, 'bench'),
        new Writable({ write(chunk, _enc, done) { bytes += chunk.length; done(); } }),
      );
      if (bytes !== ${mib} * (1 << 20)) process.exit(1);`;
    const m = await measure(process.execPath, ['--input-type=module', '-e', script]);
    if (m.code !== 0) throw new Error(`the stream benchmark failed: ${m.stderr}`);
    rows.push([
      'encrypt + decrypt streams',
      `${mib} MiB`,
      m.seconds.toFixed(2),
      `${((mib * 1.048576) / m.seconds).toFixed(0)} MB/s`,
      m.peakRssMb.toFixed(0),
    ]);
  }
  console.log(`\n${values.keys} keys, ${runs} runs each`);
  printTable(rows);
} finally {
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}
