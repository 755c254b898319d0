import { mkdir, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  compactHistory,
  createEtcdClient,
  defragmentMember,
  type Etcd3,
  EtcdProcess,
  findEtcdBinaries,
  freePort,
} from '@etcd-steward/core';
import { runProgram } from './run-program.js';
import {
  etcdRevision,
  firstDelta,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  waitFor,
} from './sidecar-helpers.js';
import { switchableStore } from './switchable-store.js';

/**
 * A randomized fault run with the proof as its oracle (docs/proof.md §5): one etcd member, its sidecar, a writer
 * (puts, deletes, txns, leases), and a schedule drawn from a seed of: the sidecar killed (SIGKILL) and restarted,
 * etcd killed and restarted, the store gone for a while, a compaction by etcd, a defragmentation, a full snapshot
 * asked for, etcd-compact and etcd-gc run on the store. Midway and at the end the store's newest chain is restored
 * and proven against etcd (`etcd-copy-backups verify --against`). The same seed gives the same schedule.
 */
export type Fault =
  | { kind: 'kill-sidecar'; downMs: number }
  | { kind: 'kill-etcd'; downMs: number }
  | { kind: 'store-outage'; downMs: number }
  | { kind: 'etcd-compaction'; behind: number }
  | { kind: 'defragment' }
  | { kind: 'full-snapshot' }
  | { kind: 'compact-program' }
  | { kind: 'gc-program' }
  | { kind: 'writes'; ms: number };

/** mulberry32: small, seeded, the same sequence everywhere. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The schedule a seed gives: `steps` faults, each followed by writes. */
export function faultSchedule(seed: number, steps: number): Fault[] {
  const random = prng(seed);
  const ms = (min: number, max: number) => Math.round(min + random() * (max - min));
  const kinds: Array<() => Fault> = [
    () => ({ kind: 'kill-sidecar', downMs: ms(0, 3000) }),
    () => ({ kind: 'kill-etcd', downMs: ms(0, 3000) }),
    () => ({ kind: 'store-outage', downMs: ms(500, 5000) }),
    () => ({ kind: 'etcd-compaction', behind: ms(0, 300) }),
    () => ({ kind: 'defragment' }),
    () => ({ kind: 'full-snapshot' }),
    () => ({ kind: 'compact-program' }),
    () => ({ kind: 'gc-program' }),
  ];
  const schedule: Fault[] = [];
  for (let i = 0; i < steps; i++) {
    schedule.push(kinds[Math.floor(random() * kinds.length)]());
    schedule.push({ kind: 'writes', ms: ms(300, 2000) });
  }
  return schedule;
}

export function describeFault(f: Fault): string {
  return Object.entries(f)
    .map(([k, v]) => (k === 'kind' ? String(v) : `${k}=${v}`))
    .join(' ');
}

/** What a run found: each checkpoint's proof outcome and exit code, and what the writer did. */
export interface FaultRunResult {
  seed: number;
  schedule: string[];
  checkpoints: Array<{ at: string; code: number; summary: string }>;
  writes: number;
  refused: number;
}

/** A writer that goes on through every fault: a write refused while etcd is down is counted and skipped. */
function startFaultWriter(endpoint: string, seed: number) {
  const random = prng(seed ^ 0x5eed);
  let client: Etcd3 = createEtcdClient({ endpoints: [endpoint] });
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
      client = createEtcdClient({ endpoints: [endpoint] });
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
  at: (...names: string[]) => string;
  log?: (line: string) => void;
}): Promise<FaultRunResult> {
  const { seed, at } = options;
  const log = options.log ?? (() => {});
  const schedule = faultSchedule(seed, options.steps);
  const result: FaultRunResult = {
    seed,
    schedule: schedule.map(describeFault),
    checkpoints: [],
    writes: 0,
    refused: 0,
  };
  const binaries = await findEtcdBinaries();
  const clientPort = await freePort();
  const peerPort = await freePort();
  const member = {
    binaries,
    name: 'f0',
    clientPort,
    peerPort,
    dataDir: at('etcd'),
    logFile: at('etcd.log'),
    throwaway: true,
  };
  let etcd = await EtcdProcess.start(member);
  await etcd.waitHealthy();
  const endpoint = etcd.clientUrl;
  const conn = { endpoints: [endpoint] };
  const control = createEtcdClient(conn);
  const store = await switchableStore(at, 'store');
  const storeDir = await store.directory('up');
  await store.point(storeDir);
  await writeFile(at('store-down'), 'the store is down');
  const sidecarPort = await freePort();
  const sidecarOptions = { endpoint, store: store.url, dir: at('sidecar'), port: sidecarPort };
  let sidecar: SidecarProcess | undefined = await startSidecar(sidecarOptions);
  const writer = startFaultWriter(endpoint, seed);
  await firstDelta(sidecar.url);
  const scratch = at('scratch');
  await mkdir(scratch, { recursive: true });

  const program = async (name: string, args: string[]) => {
    const r = await runProgram(name, args);
    log(`  ${name}: exit ${r.code}${r.code === 0 ? '' : ` ${r.stderr.trim().split('\n').at(-1)?.slice(0, 300)}`}`);
    return r;
  };
  /** The store's newest chain restored and proven against etcd; a cluster compacted less than the chain's full
   * snapshot (after etcd-compact) is compacted up to it first, as etcd's auto-compaction would in time. */
  const checkpoint = async (name: string) => {
    const verify = () =>
      runProgram('etcd-copy-backups', [
        'verify',
        '--store',
        store.url,
        '--against',
        endpoint,
        '--temp-dir',
        scratch,
        '--record',
      ]);
    let r = await verify();
    const compactedLess = /full snapshot was compacted at revision (\d+), the cluster only at/.exec(r.stdout);
    if (r.code === 5 && compactedLess) {
      await compactHistory(conn, Number(compactedLess[1]), { timeoutMs: 60_000 });
      r = await verify();
    }
    const summary = r.stdout.split('\n').find((l) => /proven|NOT PROVEN|MISMATCH|FOREIGN|NOT-RESTORABLE/i.test(l));
    result.checkpoints.push({ at: name, code: r.code, summary: summary ?? `${r.stdout}${r.stderr}`.slice(-2000) });
    log(`checkpoint ${name}: exit ${r.code} ${summary ?? r.stderr.slice(-500)}`);
  };

  try {
    for (let i = 0; i < schedule.length; i++) {
      const fault = schedule[i];
      if (fault.kind !== 'writes') log(`step ${i / 2 + 1}: ${describeFault(fault)}`);
      switch (fault.kind) {
        case 'writes':
          await sleep(fault.ms);
          break;
        case 'kill-sidecar':
          await sidecar?.kill();
          await sleep(fault.downMs);
          sidecar = await startSidecar(sidecarOptions);
          break;
        case 'kill-etcd':
          await etcd.kill();
          await sleep(fault.downMs);
          etcd = await EtcdProcess.start(member);
          await etcd.waitHealthy();
          writer.reconnect();
          break;
        case 'store-outage':
          await store.point(at('store-down'));
          await sleep(fault.downMs);
          await store.point(storeDir);
          break;
        case 'etcd-compaction': {
          const revision = (await etcdRevision(control)) - fault.behind;
          if (revision > 1) await compactHistory(conn, revision, { timeoutMs: 60_000 });
          break;
        }
        case 'defragment':
          await defragmentMember(conn, { timeoutMs: 60_000 });
          break;
        case 'full-snapshot':
          {
            const res = await fetch(`${sidecar?.url}/snapshot/full`, { method: 'POST' });
            log(`  full snapshot: ${res.status}${res.ok ? '' : ` ${(await res.text()).slice(0, 200)}`}`);
          }
          break;
        case 'compact-program':
          await program('etcd-compact', ['--store', store.url, '--temp-dir', scratch, '--lock-settle', '1s']);
          break;
        case 'gc-program':
          await program('etcd-gc', ['--store', store.url, '--keep-last', '1', '--lock-settle', '1s']);
          break;
      }
      if (i === 2 * Math.floor(options.steps / 2) - 1) await checkpoint('midway');
    }
    Object.assign(result, await writer.stop());
    const last = await etcdRevision(control);
    await waitFor('the sidecar to store the last revision', () => snapshotsReach(sidecar?.url ?? '', last), 90_000);
    await checkpoint('end');
    return result;
  } finally {
    await writer.stop().catch(() => undefined);
    control.close();
    await sidecar?.stop().catch(() => undefined);
    await etcd.stop();
  }
}
