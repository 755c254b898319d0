import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { acquireEtcdLock, ETCD_LOCK_PREFIX, type EtcdLockHold, silentLogger } from '@etcd-steward/core';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startCluster({ members: 3 });
}, 60_000);
afterAll(() => cluster?.stop());

/** Each sidecar talks to its own member: holders here do too. */
const conn = (i: number) => ({ endpoints: [cluster.endpoints[i]] });
const options = { ttlSeconds: 2, waitMs: 20_000, logger: silentLogger };

describe('the etcd lock', () => {
  it('has one holder at a time: a second one gets it only once the first releases it', async () => {
    const first = await acquireEtcdLock(conn(0), 'one-at-a-time', options);
    const events: string[] = [];
    const second = acquireEtcdLock(conn(1), 'one-at-a-time', options).then((hold) => {
      events.push('second acquired');
      return hold;
    });
    // the second waits on etcd's lock service: its key is there, behind the first's
    await waitUntil(async () => (await lockKeys('one-at-a-time')).length === 2);
    expect(events).toEqual([]);
    events.push('first released');
    await first.release();
    const hold = await second;
    expect(events).toEqual(['first released', 'second acquired']);
    expect(await lockKeys('one-at-a-time')).toEqual([hold.key]);
    await hold.release();
    expect(await lockKeys('one-at-a-time')).toEqual([]);
  });

  it("dies with its holder's lease, and a holder whose lease is revoked is told to stop", async () => {
    const first = await acquireEtcdLock(conn(0), 'lease', options);
    const second = acquireEtcdLock(conn(2), 'lease', options);
    const leaseId = await leaseOf(first);
    await cluster.client().leaseClient.leaseRevoke({ ID: leaseId });
    const hold = await second;
    await waitUntil(async () => first.signal.aborted);
    expect(String(first.signal.reason)).toMatch(/lock of lease was lost/);
    expect(hold.signal.aborted).toBe(false);
    await first.release();
    await hold.release();
  });

  it('goes with a holder that dies: the next one gets it once the lease runs out', async () => {
    const core = new URL('../dist/index.js', import.meta.url).href;
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { acquireEtcdLock, silentLogger } = await import(${JSON.stringify(core)});
         const hold = await acquireEtcdLock({ endpoints: [${JSON.stringify(cluster.endpoints[0])}] }, 'dies',
           { ttlSeconds: 2, waitMs: 20000, logger: silentLogger });
         console.log(hold.key);
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    onTestFinished(() => {
      holder.kill('SIGKILL');
    });
    const [line] = (await once(holder.stdout!, 'data')) as [Buffer];
    const key = line.toString().trim();
    expect(await lockKeys('dies')).toEqual([key]);
    holder.kill('SIGKILL');
    await once(holder, 'exit');
    const killedAt = Date.now();
    const hold = await acquireEtcdLock(conn(1), 'dies', options);
    // etcd let the lock go only when the dead holder's lease ran out (TTL 2 s), not before
    expect(Date.now() - killedAt).toBeGreaterThan(1_000);
    expect(await lockKeys('dies')).toEqual([hold.key]);
    await hold.release();
  });

  it('a holder that gives up waiting leaves nothing behind', async () => {
    const first = await acquireEtcdLock(conn(0), 'wait', options);
    await expect(acquireEtcdLock(conn(1), 'wait', { ...options, waitMs: 1_000 })).rejects.toThrow(
      /cannot take the etcd lock of wait/,
    );
    await waitUntil(async () => (await lockKeys('wait')).length === 1);
    await first.release();
  });
});

async function lockKeys(job: string): Promise<string[]> {
  return cluster.client().getAll().prefix(`${ETCD_LOCK_PREFIX}${job}/`).keys();
}

/** The lease a hold's key is attached to, as etcd reports it. */
async function leaseOf(hold: EtcdLockHold): Promise<string> {
  const res = await cluster.client().kv.range({ key: Buffer.from(hold.key) });
  return String(res.kvs[0].lease);
}

async function waitUntil(probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
