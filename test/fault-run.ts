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
import { fillQuota, moveLeader, NOSPACE_QUOTA, startFaultCluster } from './fault-cluster.js';
import { describeFault, type Fault, faultSchedule, prng, type ScheduleShape } from './fault-schedule.js';
import { type FaultStore, faultStore } from './fault-store.js';
import { runProgram } from './run-program.js';
import {
  etcdRevision,
  firstDelta,
  metric,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  waitFor,
} from './sidecar-helpers.js';

/**
 * A randomized fault run with the proof as its oracle (docs/proof.md §5): one etcd member or three, a sidecar beside
 * each (only the leader's stores; the store is shared), a writer (puts, deletes, txns, leases) against the cluster,
 * and a schedule drawn from a seed (fault-schedule.ts) of: a sidecar killed (SIGKILL) and restarted, an etcd member
 * killed and restarted, the lead moved, the store gone for a while or answering a share of requests with errors, a
 * compaction by etcd, a defragmentation, a full snapshot asked for, etcd-compact and etcd-gc run on the store.
 * Midway and at the end the store's newest chain is restored and proven against the cluster
 * (`etcd-copy-backups verify --against`). The same seed and shape give the same schedule.
 */
export { describeFault, type Fault, faultSchedule };

/** What a run found: each checkpoint's proof outcome and exit code, and what the writer did. */
export interface FaultRunResult {
  seed: number;
  schedule: string[];
  checkpoints: Array<{ at: string; code: number; summary: string }>;
  writes: number;
  refused: number;
}

/** A writer that goes on through every fault: a write refused while etcd is down is counted and skipped. */
function startFaultWriter(endpoints: string[], seed: number) {
  const random = prng(seed ^ 0x5eed);
  let client: Etcd3 = createEtcdClient({ endpoints });
  let stopped = false;
  let writes = 0;
  let refused = 0;
  const key = () => `/f/${String(Math.floor(random() * 2000)).padStart(5, '0')}`;
  const one = async () => {
    const roll = random();
    if (roll < 0.5) await client.put(key()).value(`v${writes}-${'x'.repeat(Math.floor(random() * 200))}`);
    else if (roll < 0.7) await client.delete().key(key());
    else if (roll < 0.9) {
      await client.kv.txn({
        compare: [],
        success: [
          { request_put: { key: Buffer.from(key()), value: Buffer.from(`t${writes}`) } },
          { request_put: { key: Buffer.from(key()), value: Buffer.from(`u${writes}`) } },
          { request_delete_range: { key: Buffer.from(key()) } },
        ],
        failure: [],
      });
    } else {
      const lease = client.lease(600, { autoKeepAlive: false });
      await lease.put(`/f/leased/${writes}`).value('l');
      if (random() < 0.3) await lease.revoke();
    }
  };
  const worker = async () => {
    while (!stopped) {
      try {
        await one();
        writes++;
      } catch {
        refused++;
        await sleep(100);
      }
    }
  };
  const workers = Array.from({ length: 4 }, worker);
  return {
    /** A fresh client after etcd restarted: the old one may hold its connection in back-off. */
    reconnect() {
      const old = client;
      client = createEtcdClient({ endpoints });
      old.close();
    },
    async stop() {
      stopped = true;
      await Promise.all(workers);
      client.close();
      return { writes, refused };
    },
  };
}

export async function runFaultRun(options: {
  seed: number;
  steps: number;
  members?: 1 | 3;
  /** Where the store is: a local folder, or an S3 test server behind the fault proxy (default: s3 for 3 members). */
  store?: 'local' | 's3';
  at: (...names: string[]) => string;
  log?: (line: string) => void;
}): Promise<FaultRunResult> {
  const { seed, at } = options;
  const count = options.members ?? 1;
  const storeKind = options.store ?? (count === 3 ? 's3' : 'local');
  const log = options.log ?? (() => {});
  const shape = runShape(count, storeKind);
  const schedule = faultSchedule(seed, options.steps, shape);
  const result: FaultRunResult = {
    seed,
    schedule: schedule.map(describeFault),
    checkpoints: [],
    writes: 0,
    refused: 0,
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
  const control = createEtcdClient(conn);
  const sidecarOptions = await Promise.all(
    endpoints.map(async (endpoint, i) => ({
      endpoint,
      store: store.url,
      dir: at(`sidecar-${i}`),
      port: await freePort(),
      env: { ...process.env, ...store.env },
      args: shape.nospace ? ['--alarm-check-period', '1s', '--alarm-quota-bytes', String(NOSPACE_QUOTA)] : [],
    })),
  );
  const sidecars: Array<SidecarProcess | undefined> = [];
  const writer = startFaultWriter(endpoints, seed);
  const scratch = at('scratch');

  const program = async (name: string, args: string[]) => {
    const r = await runProgram(name, args, store.env);
    log(`  ${name}: exit ${r.code}${r.code === 0 ? '' : ` ${r.stderr.trim().split('\n').at(-1)?.slice(0, 300)}`}`);
    return r;
  };
  /** The sidecar that leads now, by its metrics; undefined in a hand-over. */
  const leading = async () => {
    for (const s of sidecars) {
      if (s && (await metric(s.url, 'etcd_snapshot_leader').catch(() => undefined)) === 1) return s;
    }
    return undefined;
  };
  /** Waits until a sidecar has stored `revision`. */
  const stored = (revision: number) =>
    waitFor(
      `a sidecar to store revision ${revision}`,
      async () => {
        for (const s of sidecars) if (s && (await snapshotsReach(s.url, revision).catch(() => false))) return true;
        return false;
      },
      90_000,
    );
  /** The store's newest chain restored and proven against the cluster; a cluster compacted less than the chain's
   * full snapshot (after etcd-compact) is compacted up to it first, as etcd's auto-compaction would in time. */
  const checkpoint = async (name: string) => {
    const verify = () =>
      runProgram(
        'etcd-copy-backups',
        ['verify', '--store', store.directUrl, '--against', endpoints.join(','), '--temp-dir', scratch, '--record'],
        store.env,
      );
    let r = await verify();
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
      await stored(Number((await control.put('/f/after-compaction').value('1').exec()).header.revision));
      r = await verify();
    }
    const summary = r.stdout.split('\n').find((l) => /proven|NOT PROVEN|MISMATCH|FOREIGN|NOT-RESTORABLE/i.test(l));
    result.checkpoints.push({ at: name, code: r.code, summary: summary ?? `${r.stdout}${r.stderr}`.slice(-2000) });
    log(`checkpoint ${name}: exit ${r.code} ${summary ?? r.stderr.slice(-500)}`);
  };

  try {
    await mkdir(scratch, { recursive: true });
    for (const o of sidecarOptions) sidecars.push(await startSidecar(o));
    const first = await waitFor('a leading sidecar', leading);
    await firstDelta(first.url);
    for (let i = 0; i < schedule.length; i++) {
      const fault = schedule[i];
      if (fault.kind !== 'writes') log(`step ${i / 2 + 1}: ${describeFault(fault)}`);
      await apply(fault);
      if (i === 2 * Math.floor(options.steps / 2) - 1) await checkpoint('midway');
    }
    Object.assign(result, await writer.stop());
    await stored(await etcdRevision(control));
    await checkpoint('end');
    return result;
  } finally {
    await writer.stop().catch(() => undefined);
    control.close();
    await Promise.all(sidecars.map((s) => s?.stop().catch(() => undefined)));
    await cluster.stop();
    await store.stop();
  }

  async function apply(fault: Fault) {
    switch (fault.kind) {
      case 'writes':
        await sleep(fault.ms);
        break;
      case 'kill-sidecar': {
        const i = fault.member ?? 0;
        await sidecars[i]?.kill();
        sidecars[i] = undefined;
        await sleep(fault.downMs);
        sidecars[i] = await startSidecar(sidecarOptions[i]);
        break;
      }
      case 'kill-etcd':
        await cluster.restart(fault.member ?? 0, fault.downMs);
        writer.reconnect();
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
        if (revision > 1) await compactHistory(conn, revision, { timeoutMs: 60_000 });
        break;
      }
      case 'defragment':
        await defragmentMember({ endpoints: [endpoints[fault.member ?? 0]] }, { timeoutMs: 60_000 });
        break;
      case 'full-snapshot': {
        // Right after a hand-over the new leader's sidecar answers 503 until it takes snapshots: asked again.
        let answer = 'no sidecar leads now';
        for (let tries = 0; tries < 20; tries++) {
          const s = await leading();
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
        await program('etcd-compact', ['--store', store.url, '--temp-dir', scratch, '--lock-settle', '1s']);
        break;
      case 'gc-program':
        await program('etcd-gc', ['--store', store.url, '--keep-last', '1', '--lock-settle', '1s']);
        break;
    }
  }
}

/** The schedule's shape for a run of `members` on a store of `kind`; a 3-member run has a NOSPACE to clear. */
export function runShape(members: 1 | 3, kind: 'local' | 's3'): ScheduleShape {
  return { members, storeErrors: kind === 's3', nospace: members === 3 };
}
