import { mkdir } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  compactHistory,
  createEtcdClient,
  defragmentMember,
  type Etcd3,
  freePort,
  listAlarms,
} from '@etcd-steward/core';
import { fillQuota, moveLeader, NOSPACE_QUOTA, startFaultCluster } from './fault-cluster.ts';
import {
  compactionWhileDown,
  fullBurst,
  memberLost,
  newCluster,
  type RunContext,
  restoreCluster,
} from './fault-operations.ts';
import {
  describeFault,
  describeStep,
  EXCLUSIVE,
  type Fault,
  type FaultKind,
  faultSchedule,
  prng,
  type ScheduleShape,
  type Step,
} from './fault-schedule.ts';
import { FaultSidecars } from './fault-sidecars.ts';
import { type FaultStore, faultStore } from './fault-store.ts';
import { startFaultWriter } from './fault-writer.ts';
import { HistoryOracle } from './history-oracle.ts';
import { runProgram } from './run-program.ts';
import { etcdRevision, firstDelta, waitFor } from './sidecar-helpers.ts';
import { type Finding, StoreChecker, sameKind } from './store-checks.ts';

/**
 * A randomized fault run with an oracle that knows the history (docs/proof.md §5): one etcd member or three, a
 * sidecar beside each (only the leader's stores; the store is shared), a writer against the cluster, and a
 * schedule drawn from a seed (fault-schedule.ts) of faults (a sidecar or an etcd member killed, the lead moved, the
 * store down or failing, compactions, defragmentations, full snapshots, etcd-compact, etcd-gc, NOSPACE) and
 * operations (fault-operations.ts: restores, a member lost, a new cluster on the store, …), some overlapping.
 * The oracle (history-oracle.ts) records the cluster's history from its own watch; at random steps, midway and at
 * the end the store is checked against it (store-checks.ts) and proven against the cluster (`etcd-copy-backups
 * verify --against`). Every violation is one line naming the check, the seed and the step; the same seed, shape and
 * operations give the same schedule.
 */
export { describeFault, describeStep, type Fault, faultSchedule };

export interface Violation extends Finding {
  seed: number;
  step: number;
  /** The step's operation, or the check that found it. */
  during: string;
}

export function formatViolation(v: Violation): string {
  return `VIOLATION seed=${v.seed} step=${v.step} (${v.during}) check=${v.check}: ${v.message}`.replace(
    /\s*\n\s*/g,
    ' ',
  );
}

/** What a run found, and what it did. */
export interface FaultRunResult {
  seed: number;
  schedule: string[];
  violations: Violation[];
  /** How many times the store was checked against the oracle. */
  checks: number;
  writes: number;
  refused: number;
  /** The cluster's last revision, and how many timelines (restores that abandoned revisions) it went through. */
  revision: number;
  timelines: number;
  /** Each step's time, fault and writes, in seconds; and the whole run's. */
  stepSeconds: number[];
  seconds: number;
  /** Set when the run could not go on (an operation left the cluster unusable): the rest was not run. */
  aborted?: string;
}

export interface FaultRunOptions {
  seed: number;
  steps: number;
  members?: 1 | 3;
  /** Where the store is: a local folder, or an S3 test server behind the fault proxy (default: s3 for 3 members). */
  store?: 'local' | 's3';
  /** Draw only these kinds (FAULT_RUN_OPS). */
  only?: readonly FaultKind[];
  at: (...names: string[]) => string;
  log?: (line: string) => void;
}

export async function runFaultRun(options: FaultRunOptions): Promise<FaultRunResult> {
  const { seed, at } = options;
  const started = Date.now();
  const count = options.members ?? 1;
  const storeKind = options.store ?? (count === 3 ? 's3' : 'local');
  const log = options.log ?? (() => {});
  const shape = runShape(count, storeKind, options.only);
  const schedule = faultSchedule(seed, options.steps, shape);
  const result: FaultRunResult = {
    seed,
    schedule: schedule.map(describeStep),
    violations: [],
    checks: 0,
    writes: 0,
    refused: 0,
    revision: 0,
    timelines: 1,
    stepSeconds: [],
    seconds: 0,
  };
  const store: FaultStore = await faultStore(storeKind, at);
  let cluster: Awaited<ReturnType<typeof startFaultCluster>>;
  try {
    cluster = await startFaultCluster(count, seed, at, shape.nospace ? [`--quota-backend-bytes=${NOSPACE_QUOTA}`] : []);
  } catch (err) {
    await store.stop();
    throw err;
  }
  const { endpoints } = cluster;
  const conn = { endpoints };
  // Members come and go under the run: a client that meets a dead one too often is replaced.
  let control: Etcd3 = createEtcdClient(conn);
  const retired: Etcd3[] = [];
  const client = () => control;
  const sidecars = new FaultSidecars(
    await Promise.all(
      endpoints.map(async (endpoint, i) => ({
        endpoint,
        store: store.url,
        dir: at(`sidecar-${i}`),
        port: await freePort(),
        env: { ...process.env, ...store.env },
        args: shape.nospace ? ['--alarm-check-period', '1s', '--alarm-quota-bytes', String(NOSPACE_QUOTA)] : [],
      })),
    ),
    () => store.readyForStart(),
  );
  const writer = startFaultWriter(endpoints, seed);
  const oracle = new HistoryOracle(endpoints, log);
  oracle.start();
  const scratch = at('scratch');
  const checker = new StoreChecker({
    store,
    oracle,
    scratch,
    endpoints: () => endpoints,
    sidecarLogs: () => sidecars.logFiles(),
    log,
  });
  let step = 0;
  let during = 'start';
  const reported = new Set<string>();
  const violate = (f: Finding) => {
    // A finding that stays (an object in the wrong place) is reported once, at the step it was first seen.
    const key = `${f.check}|${f.subject}`;
    if (reported.has(key)) return;
    reported.add(key);
    const v: Violation = { ...f, seed, step, during };
    result.violations.push(v);
    log(formatViolation(v));
  };
  const program = async (name: string, args: string[]) => {
    const r = await runProgram(name, args, store.env);
    log(`  ${name}: exit ${r.code}${r.code === 0 ? '' : ` ${r.stderr.trim().split('\n').at(-1)?.slice(0, 300)}`}`);
    return r;
  };
  const ctx: RunContext = {
    cluster,
    store,
    sidecars,
    writer,
    oracle,
    checker,
    control: client,
    reconnect() {
      writer.reconnect();
      // closed at the end: a step running in the background may still be using it
      retired.push(control);
      control = createEtcdClient(conn);
    },
    at,
    scratch,
    step: () => step,
    log,
    violate,
    program,
  };
  const random = prng(seed ^ 0xc4ec);

  /**
   * The store checked against the oracle and proven against the cluster, the writer held meanwhile so that the
   * cluster's head holds still. The store is first waited for: a snapshot in v2/ must reach the head (up to 60 s).
   */
  let lastChecked = 0;
  const checkpoint = async (name: string, final: boolean) => {
    // What could have caused a finding: the steps since the last check.
    const since = schedule.slice(lastChecked, step).map((s, k) => `${lastChecked + k + 1} ${s.fault.kind}`);
    lastChecked = step;
    during = `check ${name}, after steps ${since.join(', ') || 'none'}`;
    const t0 = Date.now();
    if (!final) await writer.pause();
    const head = await etcdRevision(control);
    if (!(await oracle.reach(head))) log(`  oracle: its watch did not reach revision ${head} in time`);
    // A full snapshot at the head with no delta after it (the chain starts again after a compaction) settles the
    // store too, once the delta that may still hold the head has had 5 s to come.
    let fullAtHead: number | undefined;
    const settled = await waitFor(
      `a delta in the store to reach revision ${head}`,
      async () => {
        const reached = (await checker.listing()).filter(
          (e) => e.lastRevision >= head && e.lastRevision <= oracle.current.head,
        );
        if (reached.some((e) => e.kind === 'Incr')) return true;
        if (reached.length > 0) fullAtHead ??= Date.now();
        return fullAtHead !== undefined && Date.now() - fullAtHead > 5_000;
      },
      60_000,
    ).catch(() => false);
    if (!settled) {
      violate({
        check: 'store-lag',
        subject: `revision ${head}`,
        message: `no snapshot in v2/ reached the cluster's revision ${head} (${oracle.current.describe()}) within 60 s`,
      });
    }
    const findings = await checker.check({ random, picks: final ? 3 : 2, deep: final, head, settled });
    for (const f of findings) violate(f);
    const proof = await prove();
    if (final ? proof.code !== 0 : ![0, 5].includes(proof.code)) {
      violate({
        check: 'proof',
        subject: sameKind(`${proof.code} ${proof.summary}`),
        message: `verify --against exited ${proof.code}: ${proof.summary}`,
      });
    }
    result.checks++;
    log(
      `check ${name}: ${findings.length} finding(s), proof exit ${proof.code} ${proof.summary.slice(0, 300)} (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
    );
    if (!final) writer.resume();
  };

  /** The store's newest chain restored and proven against the cluster (docs/proof.md §5). */
  const prove = async () => {
    const verify = () =>
      runProgram(
        'etcd-copy-backups',
        ['verify', '--store', store.directUrl, '--against', endpoints.join(','), '--temp-dir', scratch, '--record'],
        store.env,
      );
    let r = await verify();
    // A cluster compacted less than the chain's full snapshot (after etcd-compact) is compacted up to it first, as
    // etcd's auto-compaction would in time.
    const compactedLess = /full snapshot was compacted at revision (\d+), the cluster only at/.exec(r.stdout);
    if (r.code === 5 && compactedLess) {
      await compactHistory(conn, Number(compactedLess[1]), { timeoutMs: 60_000 });
      r = await verify();
    }
    // etcd answers HashKV at its compact revision itself with "compacted", and the NOSPACE recovery compacts at the
    // head: with nothing written since, the backup holds the head and cannot be proven until one write more.
    const compactedAtHead = /has compacted its history past the backup's revision (\d+)/.exec(r.stdout);
    if (r.code === 5 && compactedAtHead && Number(compactedAtHead[1]) === (await etcdRevision(control))) {
      log(`  etcd compacted at its head ${compactedAtHead[1]}: one write more`);
      const next = Number((await control.put('/f/after-compaction').value('1').exec()).header.revision);
      await oracle.reach(next);
      await waitFor(
        `the store to reach revision ${next}`,
        async () => (await checker.listing()).some((e) => e.lastRevision >= next),
        90_000,
      ).catch(() => undefined);
      r = await verify();
    }
    const summary = r.stdout.split('\n').find((l) => /proven|NOT PROVEN|MISMATCH|FOREIGN|NOT-RESTORABLE/i.test(l));
    // one line: the verdict, or what the program said last
    const said = summary ?? (r.stderr.trim() || r.stdout.trim()).split('\n').at(-1) ?? '';
    return { code: r.code, summary: said.slice(0, 500) };
  };

  /** At most one step runs on in the background while the next begins (steps drawn to overlap). */
  let background: { kind: FaultKind; done: Promise<void> } | undefined;
  const settle = async () => {
    await background?.done;
    background = undefined;
  };

  try {
    await mkdir(scratch, { recursive: true });
    await sidecars.startAll();
    const first = await sidecars.waitLeading();
    if (!first) throw new Error('no sidecar leads after start-up');
    await firstDelta(first.url);
    for (let i = 0; i < schedule.length; i++) {
      const s: Step = schedule[i];
      const t0 = Date.now();
      if (EXCLUSIVE.has(s.fault.kind) || background?.kind === s.fault.kind) await settle();
      step = i + 1;
      during = s.fault.kind;
      log(`step ${step}: ${describeStep(s)}`);
      const run = apply(s.fault).catch((err) => {
        throw new Error(`step ${i + 1} (${describeFault(s.fault)}): ${err instanceof Error ? err.message : err}`, {
          cause: err,
        });
      });
      if (s.overlap) {
        await settle();
        run.catch(() => undefined); // awaited by the next settle(); meanwhile no unhandled rejection
        background = { kind: s.fault.kind, done: run };
      } else await run;
      await sleep(s.writesMs);
      if (s.check || i === Math.floor(options.steps / 2) - 1) {
        await settle();
        await checkpoint(s.check ? `after step ${step}` : 'midway', false);
      }
      result.stepSeconds.push((Date.now() - t0) / 1000);
    }
    await settle();
    Object.assign(result, await writer.stop());
    await checkpoint('end', true);
  } catch (err) {
    result.aborted = err instanceof Error ? err.message : String(err);
    log(`the run stopped: ${result.aborted}`);
    violate({ check: 'operation', subject: 'aborted', message: `the run could not go on: ${result.aborted}` });
  } finally {
    await background?.done.catch(() => undefined);
    await writer.stop().catch(() => undefined);
    result.revision = await etcdRevision(control).catch(() => oracle.current.head);
    result.timelines = oracle.timelines.length;
    await oracle.stop();
    for (const c of [control, ...retired]) c.close();
    await checker.close();
    await sidecars.stopAll().catch(() => undefined);
    await cluster.stop();
    await store.stop();
    result.seconds = (Date.now() - started) / 1000;
  }
  return result;

  async function apply(fault: Fault) {
    switch (fault.kind) {
      case 'kill-sidecar': {
        const i = fault.member ?? 0;
        await sidecars.kill(i);
        await sleep(fault.downMs);
        await sidecars.start(i);
        break;
      }
      case 'kill-etcd':
        await cluster.restart(fault.member ?? 0, fault.downMs);
        ctx.reconnect();
        break;
      case 'move-leader':
        log(`  ${await moveLeader(endpoints, fault.member).catch((err) => `not moved: ${String(err).slice(0, 200)}`)}`);
        break;
      case 'nospace':
        log(`  ${await fillQuota(endpoints)}`);
        await waitFor(
          'the sidecar to clear the NOSPACE alarm',
          async () => (await listAlarms(conn)).length === 0,
          60_000,
        );
        // the writer's client pauses after several refusals in a row
        writer.reconnect();
        break;
      case 'store-outage':
        log(`  ${await store.down(fault.downMs)}`);
        break;
      case 'store-errors':
        log(`  ${await store.errors(fault.ms, fault.rate)}`);
        break;
      case 'etcd-compaction': {
        const revision = (await etcdRevision(control)) - fault.behind;
        // The oracle must have seen what etcd is about to forget.
        if (revision > 1 && (await oracle.reach(revision))) {
          await compactHistory(conn, revision, { timeoutMs: 60_000 }).catch((err) =>
            log(`  not compacted: ${String(err).slice(0, 200)}`),
          );
        }
        break;
      }
      case 'defragment':
        await defragmentMember({ endpoints: [endpoints[fault.member ?? 0]] }, { timeoutMs: 60_000 }).catch((err) =>
          log(`  not defragmented: ${String(err).slice(0, 200)}`),
        );
        break;
      case 'full-snapshot': {
        // Right after a hand-over the new leader's sidecar answers 503 until it takes snapshots: asked again.
        let answer = 'no sidecar leads now';
        for (let tries = 0; tries < 20; tries++) {
          const s = await sidecars.leading();
          const res = s ? await fetch(`${s.url}/snapshot/full`, { method: 'POST' }).catch(() => undefined) : undefined;
          if (res) answer = `${res.status}${res.ok ? '' : ` ${(await res.text()).slice(0, 200)}`}`;
          else if (s) answer = 'the leading sidecar did not answer';
          if (res?.status !== 503 && s) break;
          await sleep(500);
        }
        log(`  full snapshot: ${answer}`);
        break;
      }
      case 'compact-program':
        checker.programsRan();
        await program('etcd-compact', ['--store', store.url, '--temp-dir', scratch, '--lock-settle', '1s']);
        break;
      case 'gc-program':
        checker.programsRan();
        await program('etcd-gc', ['--store', store.url, '--keep-last', '1', '--lock-settle', '1s']);
        break;
      case 'full-burst':
        await fullBurst(ctx, fault.count, fault.gapMs);
        break;
      case 'compaction-sidecar-down':
        await compactionWhileDown(ctx, fault.downMs, fault.behind);
        break;
      case 'member-lost':
        await memberLost(ctx, fault.damage, fault.member ?? 0);
        break;
      case 'new-cluster':
        await newCluster(ctx, fault.past);
        break;
      case 'restore-earlier':
      case 'restore-fork':
      case 'restore-spooled':
      case 'restore-outage':
      case 'fork-programs':
        await restoreCluster(ctx, fault);
        break;
    }
  }
}

/** The schedule's shape for a run of `members` on a store of `kind`; a 3-member run has a NOSPACE to clear. */
export function runShape(members: 1 | 3, kind: 'local' | 's3', only?: readonly FaultKind[]): ScheduleShape {
  return { members, storeErrors: kind === 's3', nospace: members === 3, ...(only ? { only } : {}) };
}
