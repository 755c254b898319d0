// The dataset of sizes.ts, built once per size and kept (it takes minutes at 8 GiB): a one-member etcd data dir
// whose db has grown to the size asked, in ConfigMap-shaped keys of 4 KiB; the store its sidecar made of it (the
// first full snapshot, then deltas over `revisions` single puts of 1 KiB at 3,600/s); a second store holding that
// full snapshot alone (hard links); and the keyspace's fingerprint at both ends, to hold each restore against, read
// from the stopped member's db file (through etcd, a range with a limit counts every key it could return: reading
// 8 GiB page by page that way took longer than the whole benchmark).
import { link, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import {
  type CompressionPolicy,
  dbKeyspace,
  freePort,
  type KeyspaceFingerprint,
  memberStatus,
} from '@etcd-steward/core';
import { withMember } from '@etcd-steward/testing';
import { loadConfigMaps } from './config-maps.ts';
import { measure } from './measure.ts';
import { storeReaches, until } from './store-progress.ts';
import { loadValue, valuePool, writeLoad } from './write-load.ts';

export interface SizeDataset {
  gib: number;
  /** The member's data dir (stopped): what save and validate work on. */
  dataDir: string;
  /** The full snapshot and its deltas. */
  storeDir: string;
  /** The full snapshot alone. */
  fullStoreDir: string;
  dbBytes: number;
  keys: number;
  compression: CompressionPolicy;
  /** The keyspace the full snapshot holds, and the one at the end of the deltas. */
  full: KeyspaceFingerprint;
  last: KeyspaceFingerprint;
}

/** etcd allows a db of 8 GiB; the quota leaves room for the deltas' revisions on top. */
export const ETCD_ARGS = [`--quota-backend-bytes=${10 * 2 ** 30}`, '--snapshot-count=10000'];
const VALUE_BYTES = 4096;
const ROUND_KEYS = 25_000;
const root = new URL('../..', import.meta.url).pathname;

/** Every file of `from` but the deltas (`Incr-…`), hard-linked into `to`. */
async function linkFullSnapshots(from: string, to: string): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || entry.name.startsWith('Incr-')) continue;
    const source = join(entry.parentPath, entry.name);
    const target = join(to, relative(from, source));
    await mkdir(join(target, '..'), { recursive: true });
    await link(source, target);
  }
}

/** The dataset of `gib` GiB under `dir`: read back when built before, built otherwise. */
export async function sizeDataset(
  dir: string,
  gib: number,
  options: { revisions: number; compression: CompressionPolicy; log: (line: string) => void },
): Promise<SizeDataset> {
  const home = join(dir, `${gib}GiB`);
  const record = join(home, 'dataset.json');
  const built = await readFile(record, 'utf8').catch(() => undefined);
  if (built) return JSON.parse(built) as SizeDataset;
  await rm(home, { recursive: true, force: true }); // what an interrupted build left
  const dataDir = join(home, 'data');
  const storeDir = join(home, 'store');
  const fullStoreDir = join(home, 'store-full');
  const pool = valuePool();
  const keyspaceNow = () => dbKeyspace(join(dataDir, 'member/snap/db'), { tmpDir: home }).fingerprint;
  const keys = await withMember(
    dataDir,
    async (client, endpoint) => {
      let loaded = 0;
      for (let db = 0; db < gib * 2 ** 30; ) {
        await loadConfigMaps(client, ROUND_KEYS, (i) => loadValue(pool, i, VALUE_BYTES), loaded);
        loaded += ROUND_KEYS;
        db = (await memberStatus({ endpoints: [endpoint] })).dbSize;
        options.log(`${gib} GiB: ${loaded} keys, db ${(db / 2 ** 30).toFixed(2)} GiB`);
      }
      return loaded;
    },
    ETCD_ARGS,
  );
  const full = keyspaceNow();
  const dbBytes = await withMember(
    dataDir,
    async (_client, endpoint) => {
      const stop = new AbortController();
      const sidecar = measure(
        process.execPath,
        [
          join(root, 'packages/snapshot/bin/etcd-snapshot.js'),
          ...['run', '--endpoints', endpoint, '--store', `file://${storeDir}`, '--spool-dir', join(home, 'spool')],
          ...['--server-host', '127.0.0.1', '--server-port', String(await freePort())],
          ...['--delta-snapshot-period', '5s', '--compression', options.compression],
        ],
        { signal: stop.signal },
      );
      await until("the sidecar's full snapshot", async () => (await storeReaches(storeDir)) >= full.revision, 3.6e6);
      options.log(`${gib} GiB: full snapshot at revision ${full.revision} stored`);
      await writeLoad(endpoint, { perSecond: 3600, count: options.revisions, keys: 10_000, valueSize: 1024 });
      const { revision, dbSize } = await memberStatus({ endpoints: [endpoint] });
      await until("the sidecar's deltas", async () => (await storeReaches(storeDir)) >= revision, 600_000);
      stop.abort();
      const run = await sidecar;
      if (run.code !== 0 && run.signal === null) throw new Error(`the sidecar failed: ${run.stderr.slice(-500)}`);
      return dbSize;
    },
    ETCD_ARGS,
  );
  const last = keyspaceNow();
  await rm(join(home, 'spool'), { recursive: true, force: true });
  await linkFullSnapshots(storeDir, fullStoreDir);
  const result: SizeDataset = {
    ...{ gib, dataDir, storeDir, fullStoreDir, dbBytes, keys },
    ...{ compression: options.compression, full, last },
  };
  await writeFile(record, JSON.stringify(result));
  return result;
}
