import { setTimeout as sleep } from 'node:timers/promises';
import { createEtcdClient, type Etcd3 } from '@etcd-steward/core';
import { prng } from './fault-schedule.ts';

/**
 * The fault run's writer (docs/proof.md §5): puts, deletes, txns of three and leased keys (some leases revoked)
 * against the cluster, four in flight, going on through every fault: a write refused while etcd is down is counted
 * and skipped. The run pauses it around operations that stop the whole cluster and around the oracle's checks, so
 * that the cluster's head holds still while the store is compared with it.
 */
export function startFaultWriter(endpoints: string[], seed: number) {
  const random = prng(seed ^ 0x5eed);
  let client: Etcd3 = createEtcdClient({ endpoints });
  let stopped = false;
  let paused: Promise<void> | undefined;
  let resume = () => {};
  let writes = 0;
  let refused = 0;
  let inFlight = 0;
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
      if (paused) {
        await paused;
        continue;
      }
      inFlight++;
      try {
        await one();
        writes++;
      } catch {
        refused++;
        await sleep(100);
      } finally {
        inFlight--;
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
    /** Holds every worker; resolves once no write is in flight (or after 30 s: one to a dead member may hang). */
    async pause() {
      if (!paused) paused = new Promise((r) => (resume = r));
      const deadline = Date.now() + 30_000;
      while (inFlight > 0 && Date.now() < deadline) await sleep(20);
    },
    resume() {
      paused = undefined;
      resume();
    },
    get writes() {
      return writes;
    },
    async stop() {
      stopped = true;
      this.resume();
      await Promise.all(workers);
      client.close();
      return { writes, refused };
    },
  };
}

export type FaultWriter = ReturnType<typeof startFaultWriter>;
