import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type BootstrapResult,
  type CatalogEntry,
  compactHistory,
  createEtcdClient,
  type Etcd3,
  EtcdProcess,
  findEtcdBinaries,
  forkFolder,
  keyspaceFingerprint,
  openStore,
  setAside,
} from '@etcd-steward/core';
import { xorByte } from './data-dir-damage.ts';
import type { FaultCluster } from './fault-cluster.ts';
import type { RestoreFault } from './fault-schedule.ts';
import { type FaultSidecars, startTrackedSidecar, stopSidecar } from './fault-sidecars.ts';
import type { FaultStore } from './fault-store.ts';
import type { FaultWriter } from './fault-writer.ts';
import { type HistoryOracle, readKeyspace, type Timeline } from './history-oracle.ts';
import type { ProgramResult } from './run-program.ts';
import { etcdRevision, metric, waitFor } from './sidecar-helpers.ts';
import type { Finding, StoreChecker } from './store-checks.ts';

/**
 * The operations of a fault run (docs/proof.md §5) that do more than one fault: restores (with and without --fork,
 * to an earlier revision or the newest, with deltas waiting in the spool, through a store outage, with etcd-compact
 * and etcd-gc running meanwhile), a member's data lost and etcd-validate bootstrap, a new cluster on the store,
 * etcd compacted while every sidecar is down, and bursts of full snapshots. Each keeps the oracle's timeline in
 * step with the cluster, and reports what it finds wrong as a Finding.
 */
export interface RunContext {
  cluster: FaultCluster;
  store: FaultStore;
  sidecars: FaultSidecars;
  writer: FaultWriter;
  oracle: HistoryOracle;
  checker: StoreChecker;
  /** The run's client of the cluster (all members). */
  control: () => Etcd3;
  /** New clients (the run's and the writer's) after members restarted: the old ones may be in back-off. */
  reconnect: () => void;
  at: (...names: string[]) => string;
  scratch: string;
  step: () => number;
  log: (line: string) => void;
  violate: (f: Finding) => void;
  program: (name: string, args: string[]) => Promise<ProgramResult>;
}

/** The cluster's head, the writer held and the oracle's watch caught up with it and stopped: the cluster holds still. */
async function holdStill(ctx: RunContext): Promise<number> {
  await ctx.writer.pause();
  const head = await waitFor('the cluster to answer', () => etcdRevision(ctx.control()), 60_000);
  if (!(await ctx.oracle.reach(head))) ctx.log(`  oracle: its watch did not reach revision ${head} in time`);
  await ctx.oracle.stop();
  return head;
}

/**
 * After the cluster came back on restored data at `revision`: the oracle goes on in the timeline of that revision,
 * and the cluster must hold there what the oracle recorded (else the oracle follows what it holds, and says so).
 */
async function restoredAt(ctx: RunContext, revision: number, what: string) {
  const timeline: Timeline = ctx.oracle.branch(revision);
  const expected = timeline.fingerprint(revision);
  const client = createEtcdClient({ endpoints: ctx.cluster.endpoints });
  const live = await keyspaceFingerprint(client, revision)
    .catch(() => undefined)
    .finally(() => client.close());
  if (expected && live && (live.keys !== expected.keys || live.sha256 !== expected.sha256)) {
    ctx.violate({
      check: 'restore-result',
      subject: what,
      message: `${what} gave ${live.keys} keys at revision ${revision} (fingerprint ${live.sha256.slice(0, 12)}), the cluster had ${expected.keys} (${expected.sha256.slice(0, 12)}) there (${timeline.describe()})`,
    });
    // The cluster's history up to here is whatever the restore replayed: not checked further.
    timeline.resync(revision, await readKeyspace(ctx.cluster.endpoints, revision), 1, { history: false });
  }
  ctx.log(`  ${what}: the cluster goes on from revision ${revision} in ${timeline.describe()}`);
  ctx.oracle.start();
}

/** The revision `back` (0..1) of the way through what the store covers of the current timeline; undefined: none. */
function revisionAt(entries: CatalogEntry[], timeline: Timeline, back: number): number | undefined {
  const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision);
  const covered = new Set<number>();
  for (const f of entries.filter((e) => e.kind === 'Full')) {
    let reach = f.lastRevision;
    for (const d of deltas) if (d.startRevision <= reach + 1 && d.lastRevision > reach) reach = d.lastRevision;
    for (let r = f.lastRevision; r <= Math.min(reach, timeline.head); r++) if (timeline.knows(r)) covered.add(r);
  }
  const sorted = [...covered].sort((a, b) => a - b);
  return sorted.length > 0 ? sorted[Math.min(sorted.length - 1, Math.floor(back * sorted.length))] : undefined;
}

/** etcd compacted at `revision` (which etcd refuses when it compacted there already: said, not thrown). */
async function compact(ctx: RunContext, revision: number, when: string) {
  await compactHistory({ endpoints: ctx.cluster.endpoints }, revision, { timeoutMs: 60_000 }).then(
    () => ctx.log(`  etcd compacted at ${revision} ${when}`),
    (err) => ctx.log(`  etcd not compacted at ${revision} ${when}: ${String(err).slice(0, 200)}`),
  );
}

/** etcd-restore's flags for member i's data dir. */
function memberFlags(ctx: RunContext, i: number): string[] {
  const m = ctx.cluster.member(i);
  return [
    ...['--data-dir', m.dataDir, '--force', '--name', m.name, '--initial-cluster', ctx.cluster.initialCluster],
    ...['--initial-advertise-peer-urls', m.peerUrl, '--initial-cluster-token', ctx.cluster.clusterToken],
    ...['--output', 'json'],
  ];
}

/** etcd-compact and etcd-gc on the store, both at once (they take the store's lock in turn). */
function storePrograms(ctx: RunContext): Promise<unknown> {
  ctx.checker.programsRan();
  return Promise.all([
    ctx.program('etcd-compact', ['--store', ctx.store.url, '--temp-dir', ctx.scratch, '--lock-settle', '1s']),
    ctx.program('etcd-gc', ['--store', ctx.store.url, '--keep-last', '1', '--lock-settle', '1s']),
  ]);
}

/**
 * The runbook's restore, every member from the store (docs/restore.md, Several members), etcd and the sidecars
 * started again after it, each sidecar on its old spool dir.
 */
export async function restoreCluster(ctx: RunContext, f: RestoreFault) {
  // The store down while writes arrive: the sidecars keep in their spools what they cannot upload.
  let outage = f.spoolMs ? await ctx.store.outage() : undefined;
  if (f.spoolMs) await sleep(f.spoolMs);
  const head = await holdStill(ctx);
  await ctx.sidecars.stopAll();
  if (outage && !f.outageMs) {
    ctx.log(`  store outage before the restore: ${await outage.end()}`);
    outage = undefined;
  }
  await ctx.cluster.stopAll();
  const entries = await ctx.checker.listing();
  let revision = f.back === undefined ? undefined : revisionAt(entries, ctx.oracle.current, f.back);
  // While the store is down for the sidecars, the restore reads it where it answers.
  const storeUrl = outage ? ctx.store.directUrl : ctx.store.url;
  let programs: Promise<unknown> | undefined;
  let restored = 0;
  for (let i = 0; i < ctx.cluster.count; i++) {
    // The last member's restore sets the abandoned snapshots aside, once every member has read them.
    const fork = f.fork && i === ctx.cluster.count - 1;
    if (f.programs && fork) programs = storePrograms(ctx);
    const res = await ctx.program('etcd-restore', [
      ...['--store', storeUrl, ...memberFlags(ctx, i)],
      ...(revision === undefined ? [] : ['--to-revision', String(revision)]),
      ...(fork ? ['--fork'] : []),
    ]);
    if (res.code !== 0) {
      ctx.violate({
        check: 'restore',
        subject: `member ${i}`,
        message: `etcd-restore${revision === undefined ? '' : ` --to-revision ${revision}`} of member ${i} exited ${res.code}: ${res.stderr.trim().split('\n').at(-1)?.slice(0, 300)}`,
      });
      // Members restored before it hold the new cluster's data, the rest the old one's: no cluster forms from both.
      if (restored > 0) throw new Error(`member ${i} was not restored after ${restored} member(s) were`);
      break;
    }
    const out = JSON.parse(res.stdout) as { revision: number; setAside?: { folder: string; snapshots: string[] } };
    revision ??= out.revision;
    restored++;
    if (out.setAside) ctx.log(`  set aside ${out.setAside.snapshots.length} snapshot(s) to ${out.setAside.folder}`);
  }
  if (revision === undefined || restored < ctx.cluster.count) {
    // Nothing (or not every member) was restored: etcd-restore left the data dirs as they were.
    ctx.log('  the cluster starts again on its own data');
    await ctx.cluster.startAll();
    ctx.reconnect();
    ctx.oracle.start();
  } else {
    ctx.log(`  restored ${ctx.cluster.count} member(s) to revision ${revision} (the cluster was at ${head})`);
    if (revision < head) ctx.checker.expectSetAside(revision, entries, f.programs === true, ctx.step());
    await ctx.cluster.startAll();
    ctx.reconnect();
    await restoredAt(ctx, revision, `the restore at step ${ctx.step()}`);
  }
  ctx.writer.resume();
  if (f.compactAfterMs !== undefined) {
    // etcd compacts past the fork before any sidecar could compare the revisions after it.
    await sleep(f.compactAfterMs);
    const at = await etcdRevision(ctx.control());
    if (await ctx.oracle.reach(at)) await compact(ctx, at, 'before the sidecars started');
  }
  // The outage goes on while the sidecars start (on S3; a local store lets them start once it is over).
  const ended = (async () => {
    if (!outage) return;
    await sleep(f.outageMs ?? 0);
    ctx.log(`  store outage through the restore: ${await outage.end()}`);
  })();
  // Without --fork the sidecar sets the abandoned snapshots aside as it starts: the programs run against that.
  if (f.programs && !programs) programs = storePrograms(ctx);
  await ctx.sidecars.startAll();
  await Promise.all([programs, ended]);
  if (!f.fork && revision !== undefined && revision < head) {
    await setAsideBySidecar(ctx, revision, entries, f.compactAfterMs !== undefined, f.programs === true);
  }
}

/**
 * Without --fork, the store restores the undone revisions until a sidecar has noticed the fork and set them aside
 * (docs/concepts.md, The store's history): the run waits for that (up to 60 s) before it goes on, so that what it
 * does next (another restore, say) meets the store the sidecar is meant to leave.
 */
async function setAsideBySidecar(
  ctx: RunContext,
  revision: number,
  before: CatalogEntry[],
  compacted: boolean,
  programsRan = false,
) {
  const abandoned = new Set(before.filter((e) => e.lastRevision > revision).map((e) => e.name));
  if (abandoned.size === 0) return;
  const left = async () => (await ctx.checker.listing()).filter((e) => abandoned.has(e.name)).map((e) => e.name);
  const refused = async () => {
    for (const s of ctx.sidecars.running) {
      if (s && (await metric(s.url, 'etcd_snapshot_history_refused').catch(() => undefined)) === 1) return true;
    }
    return false;
  };
  // etcd-gc, run while the sidecars started, deleted every snapshot holding a revision both histories share.
  const sharedGone = async () =>
    programsRan &&
    !(await ctx.checker.listing()).some((e) => (e.kind === 'Incr' ? e.startRevision : e.lastRevision) <= revision);
  const unprovable = async () => (compacted || (await sharedGone())) && (await refused());
  const deadline = Date.now() + 60_000;
  let still = await left();
  while (still.length > 0 && Date.now() < deadline && !(await unprovable())) {
    await sleep(500);
    still = await left();
  }
  if (still.length > 0 && (await unprovable())) {
    // etcd compacted every revision where the histories could be proven to agree before any sidecar started, or gc
    // deleted every snapshot that held one: the sidecar refuses the store rather than guess where they forked
    // (docs/concepts.md, The store's history). The operator's remedy: move the snapshots past the restored revision
    // to forks/, as etcd-restore --fork would have.
    ctx.log(
      `  the sidecars refuse the store (nothing provably shared${compacted ? '' : ': gc deleted what the histories share'}); moving the ${still.length} snapshot(s) past ${revision} to forks/ by hand`,
    );
    const store = await openStore(ctx.store.directUrl, { env: ctx.store.env });
    try {
      await setAside(store, revision, forkFolder(revision), { lockSettleMs: 1_000 });
    } finally {
      await store.close?.();
    }
    // With gc's deletions nothing of this history is left to restore until the sidecar, finding no chain, has stored
    // a full snapshot: the operator waits for it before anything else, as the run does.
    const stored = async () =>
      (await ctx.checker.listing()).some((e) => e.kind === 'Full' && e.lastRevision > revision);
    const waitUntil = Date.now() + 60_000;
    while (!(await stored()) && Date.now() < waitUntil) await sleep(500);
    if (!(await stored())) {
      ctx.violate({
        check: 'set-aside',
        subject: `restore at step ${ctx.step()}`,
        message: `60 s after the snapshots past revision ${revision} were moved to forks/ by hand, the sidecars have stored no full snapshot of the restored history`,
      });
    }
    return;
  }
  if (still.length > 0) {
    ctx.violate({
      check: 'set-aside',
      subject: `restore at step ${ctx.step()}`,
      message: `60 s after the sidecars started on the cluster restored to revision ${revision}, ${still.length} of the ${abandoned.size} snapshot(s) past it are still in v2/: ${still.join(', ')}`,
    });
  }
}

/** A member's data dir lost or damaged, then etcd-validate bootstrap, as its init container would run it. */
export async function memberLost(ctx: RunContext, damage: 'wiped' | 'damaged', i: number) {
  const { cluster } = ctx;
  const m = cluster.member(i);
  const alone = cluster.count === 1;
  const head = alone ? await holdStill(ctx) : 0;
  const entries = alone ? await ctx.checker.listing() : [];
  // The pod goes, its sidecar with it.
  await ctx.sidecars.kill(i);
  await cluster.kill(i);
  if (damage === 'wiped') await rm(m.dataDir, { recursive: true, force: true });
  else {
    await xorByte(join(m.dataDir, 'member/snap/db'), 64);
    await xorByte(join(m.dataDir, 'member/snap/db'), 4096 + 64);
  }
  const others = ctx.cluster.endpoints.filter((_, j) => j !== i);
  const expected = alone ? 'restore' : 'rejoin';
  // Kubernetes runs a failed init container again: so does the run, three times in all (a cluster that just lost a
  // member may not answer a membership change at once).
  let res: ProgramResult | undefined;
  let result: BootstrapResult | undefined;
  for (let attempt = 1; attempt <= 3 && result?.case !== expected; attempt++) {
    if (attempt > 1) await sleep(2_000);
    res = await ctx.program('etcd-validate', [
      ...['bootstrap', '--data-dir', m.dataDir, '--store', ctx.store.url, '--name', m.name],
      ...['--initial-cluster', cluster.initialCluster, '--initial-advertise-peer-urls', m.peerUrl],
      ...['--initial-cluster-token', cluster.clusterToken, '--output', 'json'],
      ...(alone ? [] : ['--endpoints', others.join(',')]),
    ]);
    result = res.stdout ? (JSON.parse(res.stdout) as BootstrapResult) : undefined;
  }
  if (res?.code !== 0 || result?.case !== expected) {
    ctx.violate({
      check: 'member-lost',
      subject: `member ${i}`,
      message: `etcd-validate bootstrap of member ${i} (data ${damage}) exited ${res?.code} with case ${result?.case}, not ${expected}, three times: ${result?.reason ?? res?.stderr.trim().split('\n').at(-1)}`,
    });
    throw new Error(`member ${i} could not be brought back: the run cannot go on`);
  }
  ctx.log(`  bootstrap: ${result.case}: ${result.reason.slice(0, 200)}`);
  if (alone) {
    const revision = result.restored?.revision ?? 0;
    if (revision < head) ctx.checker.expectSetAside(revision, entries, false, ctx.step());
    await cluster.start(i);
    ctx.reconnect();
    await restoredAt(ctx, revision, `the bootstrap restore at step ${ctx.step()}`);
    await ctx.sidecars.start(i);
    ctx.writer.resume();
    if (revision < head) await setAsideBySidecar(ctx, revision, entries, false);
    return;
  }
  const etcd = result.etcd;
  await cluster.start(i, etcd && { initialCluster: etcd.initialCluster, clusterState: etcd.initialClusterState });
  const promote = await ctx.program('etcd-validate', [
    ...['promote', '--name', m.name, '--initial-advertise-peer-urls', m.peerUrl],
    ...['--endpoints', others.join(','), '--timeout', '120'],
  ]);
  if (promote.code !== 0) {
    ctx.violate({
      check: 'member-lost',
      subject: `promote member ${i}`,
      message: `etcd-validate promote of member ${i} exited ${promote.code}: ${promote.stderr.trim().split('\n').at(-1)}`,
    });
  }
  ctx.reconnect();
  await ctx.sidecars.start(i);
}

/** Every object under v2/ and forks/ with its size: what a refusing sidecar must leave as it is. */
async function storeContents(ctx: RunContext): Promise<Map<string, number>> {
  const contents = new Map((await ctx.checker.listing()).map((e) => [e.name, e.size]));
  for (const o of await ctx.checker.forksListing()) contents.set(o.name, o.size);
  return contents;
}

/**
 * Another cluster on the store (docs/concepts.md, The store's history): a new etcd, with a sidecar of its own on the
 * store, must be refused (/healthz 503, etcd_snapshot_history_refused 1) and leave the store as it was. The run's
 * own sidecars are stopped meanwhile, so that nothing else writes to the store.
 */
export async function newCluster(ctx: RunContext, past: boolean) {
  await ctx.writer.pause();
  await ctx.sidecars.stopAll();
  const before = await storeContents(ctx);
  const newest = Math.max(0, ...(await ctx.checker.listing()).map((e) => e.lastRevision));
  const dir = ctx.at(`new-cluster-${ctx.step()}`);
  await mkdir(dir, { recursive: true });
  const etcd = await EtcdProcess.start({
    binaries: await findEtcdBinaries(),
    name: 'n0',
    dataDir: join(dir, 'data'),
    logFile: join(dir, 'etcd.log'),
    throwaway: true,
  });
  const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
  try {
    await etcd.waitHealthy();
    // Past the store's newest revision, revisions alone would let its deltas continue the store's chain.
    const target = past ? Math.min(newest + 20, 20_000) : 50;
    const write = async (n: number) => {
      for (let k = 0; k < n; k++) await client.put(`/f/${String(k % 2000).padStart(5, '0')}`).value(`new-${k}`);
    };
    await Promise.all(Array.from({ length: 8 }, () => write(Math.ceil(target / 8))));
    ctx.log(`  a new cluster at revision ${await etcdRevision(client)} (the store's newest is ${newest})`);
    const sidecar = await startTrackedSidecar({
      endpoint: etcd.clientUrl,
      store: ctx.store.url,
      dir: join(dir, 'sidecar'),
      env: { ...process.env, ...ctx.store.env },
    });
    try {
      let refused: number | undefined;
      const deadline = Date.now() + 60_000;
      while (refused !== 1 && Date.now() < deadline) {
        refused = await metric(sidecar.url, 'etcd_snapshot_history_refused').catch(() => undefined);
        await sleep(200);
      }
      await write(20);
      await sleep(2_500); // more than two delta periods
      const health = (await fetch(`${sidecar.url}/healthz`).catch(() => undefined))?.status;
      if (refused !== 1 || health !== 503) {
        ctx.violate({
          check: 'new-cluster',
          subject: 'refusal',
          message: `a sidecar on a new cluster did not refuse the store: etcd_snapshot_history_refused ${refused}, /healthz ${health}`,
        });
      }
    } finally {
      await stopSidecar(sidecar);
    }
    const after = await storeContents(ctx);
    const added = [...after].filter(([n, size]) => before.get(n) !== size).map(([n]) => n);
    const removed = [...before.keys()].filter((n) => !after.has(n));
    if (added.length + removed.length > 0) {
      ctx.violate({
        check: 'new-cluster',
        subject: 'store changed',
        message: `a refused sidecar changed the store: ${added.length > 0 ? `wrote ${added.join(', ')}` : ''}${removed.length > 0 ? ` removed ${removed.join(', ')}` : ''}`,
      });
    }
  } finally {
    client.close();
    await etcd.stop();
    await rm(dir, { recursive: true, force: true });
  }
  await ctx.sidecars.startAll();
  ctx.writer.resume();
}

/** Every sidecar down while etcd compacts past what they stored: they must start a new chain with a full snapshot. */
export async function compactionWhileDown(ctx: RunContext, downMs: number, behind: number) {
  await ctx.sidecars.killAll();
  await sleep(downMs / 2);
  const head = await etcdRevision(ctx.control());
  const revision = head - behind;
  // The oracle must have seen what etcd is about to forget.
  if (revision > 1 && (await ctx.oracle.reach(revision))) await compact(ctx, revision, 'while no sidecar ran');
  await sleep(downMs / 2);
  await ctx.sidecars.startAll();
}

/** Several full snapshots asked of the leading sidecar within one delta period. */
export async function fullBurst(ctx: RunContext, count: number, gapMs: number) {
  const ask = async (url: string) => {
    const res = await fetch(`${url}/snapshot/full`, { method: 'POST' }).catch(() => undefined);
    return res ? res.status : 0;
  };
  // Right after a hand-over the new leader's sidecar answers 503 until it takes snapshots: the burst waits for it.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const s = await ctx.sidecars.waitLeading(Math.max(0, deadline - Date.now()));
    if (!s) {
      ctx.log('  no sidecar leads: no burst');
      return;
    }
    const answers = [ask(s.url)];
    for (let k = 1; k < count; k++) {
      await sleep(gapMs);
      answers.push(ask(s.url));
    }
    const statuses = await Promise.all(answers);
    if (statuses.some((a) => a !== 503) || Date.now() > deadline) {
      ctx.log(`  ${count} full snapshots asked ${gapMs} ms apart: ${statuses.join(' ')}`);
      return;
    }
    await sleep(500);
  }
}
