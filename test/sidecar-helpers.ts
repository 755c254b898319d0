import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  type CatalogEntry,
  createEtcdClient,
  DeltaDecoder,
  type DeltaEvent,
  decompressor,
  type Etcd3,
  EtcdProcess,
  fetchFullSnapshot,
  findEtcdBinaries,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  listSnapshots,
  runSnapshotRestore,
  type SnapStore,
} from '@etcd-steward/core';
import { expect } from 'vitest';

const BIN = fileURLToPath(new URL('../packages/snapshot/bin/etcd-snapshot.js', import.meta.url));

/** Test timings: a delta every second, a quick hand-over, leadership checked every second. */
export const FAST_SIDECAR = [
  '--delta-snapshot-period',
  '1s',
  '--delta-snapshot-memory-limit',
  '256Ki',
  '--reelection-period',
  '1s',
  '--delta-upload-timeout',
  '3s',
];

/** `args`, plus each flag/value pair of `defaults` that `args` does not set itself. */
function withDefaults(args: string[], defaults: string[]): string[] {
  const pairs: string[] = [];
  for (let i = 0; i < defaults.length; i += 2) {
    if (!args.includes(defaults[i])) pairs.push(defaults[i], defaults[i + 1]);
  }
  return [...pairs, ...args];
}

export interface SidecarProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
  kill(): Promise<void>;
  log(): Promise<string>;
}

/** `etcd-snapshot run` as a process, bound to 127.0.0.1, its log in `<dir>/sidecar.log`; resolves once it serves. */
export async function startSidecar(options: {
  endpoint: string;
  /** The --store URL; undefined when `args` name the store with ebr's --storage-provider flags. */
  store: string | undefined;
  dir: string;
  port?: number;
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** With --server-tls-cert: the URL's scheme is https, and this answers whether /healthz at `url` answers. */
  https?: (url: string) => Promise<unknown>;
  /** A command the sidecar runs under (e.g. IN_OWN_PID_NAMESPACE from pid-namespace.ts). */
  wrap?: string[];
}): Promise<SidecarProcess> {
  const port = options.port ?? (await freePort());
  await mkdir(options.dir, { recursive: true });
  const logFile = join(options.dir, 'sidecar.log');
  const [command, ...wrapArgs] = [...(options.wrap ?? []), process.execPath];
  const child = spawn(
    command,
    [
      ...wrapArgs,
      BIN,
      'run',
      '--endpoints',
      options.endpoint,
      ...(options.store === undefined ? [] : ['--store', options.store]),
      '--spool-dir',
      join(options.dir, 'spool'),
      '--server-host',
      '127.0.0.1',
      '--server-port',
      String(port),
      ...withDefaults(options.args ?? [], FAST_SIDECAR),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: options.env },
  );
  const log = createWriteStream(logFile, { flags: 'a' });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `${options.https ? 'https' : 'http'}://127.0.0.1:${port}`;
  const probe = options.https ?? ((base: string) => fetch(`${base}/healthz`));
  for (let i = 0; ; i++) {
    if (child.exitCode !== null)
      throw new Error(`the sidecar exited with ${child.exitCode}: ${await readFile(logFile, 'utf8')}`);
    if ((await probe(url).catch(() => undefined)) !== undefined) break;
    if (i > 600) throw new Error('the sidecar did not start serving in time');
    await sleep(50);
  }
  return {
    url,
    child,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    log: () => readFile(logFile, 'utf8'),
  };
}

/** One value of a Prometheus metric from the sidecar's /metrics (the first series when labels are not given). */
export async function metric(url: string, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `) || (!labels && l.startsWith(`${name}{`)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : undefined;
}

/** Whether the sidecar's snapshots (full or delta) reach `revision`, by its metrics. */
export async function snapshotsReach(url: string, revision: number): Promise<boolean> {
  const kinds = await Promise.all(
    ['Full', 'Incr'].map((k) => metric(url, 'etcdbr_snapshot_latest_revision', `kind="${k}"`)),
  );
  return Math.max(...kinds.map((v) => v ?? 0)) >= revision;
}

/** Waits until the sidecar has stored a delta, by its metrics. */
export function firstDelta(url: string, what = 'the first delta'): Promise<true> {
  return waitFor(what, async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Incr"')) ?? 0) > 0);
}

/** etcd's keyspace now, once the sidecar has stored everything up to it. */
export async function keyspaceOnceStored(client: Etcd3, url: string): Promise<KeyspaceFingerprint> {
  const source = await keyspaceFingerprint(client);
  await waitFor('the deltas to reach the last revision', () => snapshotsReach(url, source.revision));
  return source;
}

/** Polls `probe` until it answers something but undefined or false (0 is an answer: compare counts), returns it. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** etcd's current revision. */
export async function etcdRevision(client: Etcd3): Promise<number> {
  return Number((await client.kv.range({ key: Buffer.from([0]), limit: 1 })).header.revision);
}

export interface WriterResult {
  writes: number;
  /** Writes etcd refused for a moment (timed out, no leader) and the writer went past. */
  transient: number;
  seconds: number;
  perSecond: number;
}

/**
 * A steady stream of mixed writes until stopped: puts (new keys and overwrites), deletes and multi-op txns,
 * `concurrency` in flight. Returns what it wrote and the rate it reached.
 */
export function startWriter(
  client: Etcd3,
  options: { prefix?: string; concurrency?: number; valueSize?: number } = {},
) {
  const prefix = options.prefix ?? '/w/';
  const value = 'v'.repeat(options.valueSize ?? 100);
  let stopped = false;
  let writes = 0;
  let transient = 0;
  let n = 0;
  const started = Date.now();
  const key = (i: number) => Buffer.from(`${prefix}${String(i % 5000).padStart(5, '0')}`);
  const write = (i: number) => {
    const roll = i % 10;
    if (roll < 6) return client.kv.put({ key: key(i * 7), value: Buffer.from(`${value}${i}`) });
    if (roll < 8) return client.kv.deleteRange({ key: key(i * 3) });
    return client.kv.txn({
      compare: [],
      success: [
        { request_put: { key: key(i), value: Buffer.from(`t${i}`) } },
        { request_put: { key: key(i + 1), value: Buffer.from(`u${i}`) } },
        { request_delete_range: { key: key(i + 2) } },
      ],
      failure: [],
    });
  };
  const worker = async () => {
    let refusedInARow = 0;
    while (!stopped) {
      try {
        await write(n++);
        writes++;
        refusedInARow = 0;
      } catch (err) {
        // A loaded cluster times requests out around a leadership change, as any client of etcd sees; the
        // tests compare against what etcd holds afterwards, so a write that may or may not have applied is
        // fine. A cluster that keeps refusing is a failure.
        if (!TRANSIENT_ETCD_ERROR.test(String(err)) || ++refusedInARow > 40) throw err;
        transient++;
        await sleep(250);
      }
    }
  };
  let failure: unknown;
  // Kept, not thrown: a test that fails early closes the client under the workers.
  const workers = Array.from({ length: options.concurrency ?? 16 }, () => worker().catch((err) => (failure ??= err)));
  return {
    get writes() {
      return writes;
    },
    async stop(): Promise<WriterResult> {
      stopped = true;
      await Promise.all(workers);
      if (failure) throw failure;
      const seconds = (Date.now() - started) / 1000;
      return { writes, transient, seconds, perSecond: Math.round(writes / seconds) };
    },
  };
}

/**
 * etcd's answers that mean "not now" (a request timed out, a leader is being chosen or just changed), and the
 * client's own pause on a member after three of them in a row (five seconds).
 */
const TRANSIENT_ETCD_ERROR = /request timed out|leader changed|no leader|too many requests|UNAVAILABLE|circuit breaker/;

/**
 * What is wrong with a store's chain as the sidecar writes it: deltas, in revision order, each start right after the
 * previous one (or continue a full snapshot newer than it, where the chain started again), and the first delta past
 * the newest full snapshot starts no later than right after it (it may go on through it).
 */
export function chainProblems(entries: readonly CatalogEntry[]): string[] {
  const problems: string[] = [];
  const fulls = entries.filter((e) => e.kind === 'Full');
  const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.lastRevision - b.lastRevision);
  let previous: CatalogEntry | undefined;
  for (const d of deltas) {
    if (previous && d.startRevision <= previous.lastRevision) problems.push(`${d.name} overlaps ${previous.name}`);
    // A chain that starts again at a full snapshot: right after it, or through it.
    const afterFull = fulls.some(
      (f) =>
        d.startRevision <= f.lastRevision + 1 &&
        d.lastRevision > f.lastRevision &&
        (!previous || f.lastRevision >= previous.lastRevision),
    );
    const afterDelta = previous !== undefined && previous.lastRevision + 1 === d.startRevision;
    if (!afterFull && !afterDelta) problems.push(`${d.name} does not continue the chain (gap before it)`);
    previous = d;
  }
  const newest = newestFull(entries);
  const first = deltas.find((d) => newest && d.lastRevision > newest.lastRevision);
  if (newest && first && first.startRevision > newest.lastRevision + 1) {
    problems.push(`${first.name} leaves a gap after the newest full snapshot ${newest.name}`);
  }
  return problems;
}

/** The revisions after the oldest full snapshot that no delta holds, as `from..to` ranges. */
export function deltaGaps(entries: readonly CatalogEntry[]): string[] {
  const oldest = entries.filter((e) => e.kind === 'Full').sort((a, b) => a.lastRevision - b.lastRevision)[0];
  if (!oldest) return [];
  const head = Math.max(...entries.map((e) => e.lastRevision));
  const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision);
  const gaps: string[] = [];
  let covered = oldest.lastRevision;
  for (const d of deltas) {
    if (d.startRevision > covered + 1) gaps.push(`${covered + 1}..${d.startRevision - 1}`);
    covered = Math.max(covered, d.lastRevision);
  }
  if (covered < head) gaps.push(`${covered + 1}..${head}`);
  return gaps;
}

function newestFull(entries: readonly CatalogEntry[]): CatalogEntry | undefined {
  return entries
    .filter((e) => e.kind === 'Full')
    .sort((a, b) => a.lastRevision - b.lastRevision || a.createdAt - b.createdAt)
    .at(-1);
}

/**
 * A reference restore, kept deliberately plain as the test's oracle: the newest full snapshot restored with
 * etcdctl, a throwaway etcd started on it, then every later delta applied one revision per txn over gRPC
 * (values without leases, as ebr replays them), checking that each txn lands on its revision. Returns the
 * restored keyspace's fingerprint.
 */
export async function restoreNewestChain(
  store: SnapStore,
  workDir: string,
): Promise<KeyspaceFingerprint & { deltas: number }> {
  // etcd 3.4 fsyncs every txn and has no --unsafe-no-fsync: on tmpfs that costs nothing, and the replay is ~3x faster.
  const scratch = existsSync('/dev/shm') ? await mkdtemp('/dev/shm/reference-restore-') : workDir;
  try {
    return await restoreInto(store, scratch);
  } finally {
    if (scratch !== workDir) await rm(scratch, { recursive: true, force: true });
  }
}

/** Restores the store's newest chain into `workDir` (as restoreNewestChain) and expects exactly `source`. */
export async function expectRestored(store: SnapStore, workDir: string, source: KeyspaceFingerprint) {
  const restored = await restoreNewestChain(store, workDir);
  expect({ revision: restored.revision, keys: restored.keys, sha256: restored.sha256 }).toEqual(source);
  return restored;
}

async function restoreInto(store: SnapStore, workDir: string): Promise<KeyspaceFingerprint & { deltas: number }> {
  const entries = await listSnapshots(store);
  const full = newestFull(entries);
  if (!full) throw new Error('no full snapshot in the store');
  const deltas = entries.filter((e) => e.kind === 'Incr' && e.lastRevision > full.lastRevision);
  const binaries = await findEtcdBinaries();
  await mkdir(workDir, { recursive: true });
  const snapshotFile = join(workDir, 'full.db');
  await fetchFullSnapshot(store, full, snapshotFile);
  const peerPort = await freePort();
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const dataDir = join(workDir, 'data');
  await runSnapshotRestore(binaries, snapshotFile, dataDir, {
    name: 'restored',
    initialCluster: `restored=${peerUrl}`,
    initialClusterToken: 'reference-restore',
    initialAdvertisePeerUrls: peerUrl,
  });
  const etcd = await EtcdProcess.start({
    binaries,
    name: 'restored',
    dataDir,
    logFile: join(workDir, 'etcd.log'),
    peerPort,
  });
  try {
    await etcd.waitHealthy();
    const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
    try {
      let revision = await etcdRevision(client);
      for (const delta of deltas) {
        const decoder = new DeltaDecoder(delta.name);
        const [, events] = await Promise.all([
          pipeline(await store.get(delta.name), decompressor(delta.compression), decoder),
          decoder.toArray() as Promise<DeltaEvent[]>,
        ]);
        for (const group of byRevision(events)) {
          const at = group[0].modRevision;
          if (at <= revision) continue;
          if (at !== revision + 1) throw new Error(`${delta.name}: revision ${at} follows ${revision}: a gap`);
          const res = await client.kv.txn({
            compare: [],
            success: group.map((e) =>
              e.type === 'put'
                ? { request_put: { key: e.key, value: e.value } }
                : { request_delete_range: { key: e.key } },
            ),
            failure: [],
          });
          revision = Number(res.header.revision);
          if (revision !== at) throw new Error(`${delta.name}: replaying revision ${at} landed on ${revision}`);
        }
      }
      return { ...(await keyspaceFingerprint(client)), deltas: deltas.length };
    } finally {
      client.close();
    }
  } finally {
    await etcd.stop();
  }
}

function byRevision(events: DeltaEvent[]): DeltaEvent[][] {
  const groups: DeltaEvent[][] = [];
  for (const e of events) {
    const last = groups[groups.length - 1];
    if (last && last[0].modRevision === e.modRevision) last.push(e);
    else groups.push([e]);
  }
  return groups;
}
