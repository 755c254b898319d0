import type { Etcd3 } from 'etcd3';
import { seededRandom } from './seeded-random.js';

/** What a workload did, so tests can check that a restore brought all of it back. */
export interface WorkloadSummary {
  puts: number;
  deletes: number;
  txns: number;
  leasedKeys: number;
}

/**
 * Writes a realistic mix: single puts (some overwriting), multi-op txns, deletes of single keys and ranges,
 * and keys attached to long leases. About `keys` live keys remain afterwards.
 */
export async function writeWorkload(
  client: Etcd3,
  options: { keys: number; valueSize?: number; seed?: number; prefix?: string; concurrency?: number },
): Promise<WorkloadSummary> {
  const random = seededRandom(options.seed ?? 1);
  const prefix = options.prefix ?? '/data/';
  const valueSize = options.valueSize ?? 64;
  const concurrency = options.concurrency ?? 32;
  const value = () => {
    const seed = Math.floor(random() * 1e9).toString(36);
    return seed.repeat(Math.ceil(valueSize / seed.length)).slice(0, valueSize);
  };
  const key = (i: number) => `${prefix}${String(i).padStart(8, '0')}`;
  const summary: WorkloadSummary = { puts: 0, deletes: 0, txns: 0, leasedKeys: 0 };
  const ops: Array<() => Promise<unknown>> = [];

  const txnSize = 10;
  const txnKeys = Math.floor(options.keys * 0.3);
  const singleKeys = options.keys - txnKeys;
  for (let i = 0; i < singleKeys; i++) {
    ops.push(() => client.put(key(i)).value(value()).exec());
    summary.puts++;
  }
  for (let i = singleKeys; i < options.keys; i += txnSize) {
    const start = i;
    ops.push(() =>
      client.kv.txn({
        compare: [],
        success: Array.from({ length: Math.min(txnSize, options.keys - start) }, (_, j) => ({
          request_put: { key: Buffer.from(key(start + j)), value: Buffer.from(value()) },
        })),
        failure: [],
      }),
    );
    summary.txns++;
    summary.puts += Math.min(txnSize, options.keys - start);
  }
  await runConcurrently(ops, concurrency);

  // Overwrites, deletes and mixed txns on top, in order, so that versions and tombstones vary.
  const later: Array<() => Promise<unknown>> = [];
  for (let n = 0; n < Math.max(10, options.keys / 20); n++) {
    const i = Math.floor(random() * options.keys);
    const roll = random();
    if (roll < 0.5) {
      later.push(() => client.put(key(i)).value(value()).exec());
      summary.puts++;
    } else if (roll < 0.8) {
      later.push(() => client.delete().key(key(i)).exec());
      summary.deletes++;
    } else {
      later.push(() =>
        client.kv.txn({
          compare: [],
          success: [
            { request_put: { key: Buffer.from(key(i)), value: Buffer.from(value()) } },
            { request_delete_range: { key: Buffer.from(key((i + 1) % options.keys)) } },
          ],
          failure: [],
        }),
      );
      summary.txns++;
    }
  }
  await runConcurrently(later, 1);
  // A range delete, then leased keys.
  await client.kv.deleteRange({ key: Buffer.from(key(options.keys - 5)), range_end: Buffer.from(key(options.keys)) });
  summary.deletes++;
  const lease = client.lease(3600);
  for (let i = 0; i < 20; i++) {
    await lease.put(`${prefix}leased/${i}`).value(value());
    summary.leasedKeys++;
  }
  // Stop keep-alives without revoking: the lease (an hour) outlives any test, and its keys stay.
  lease.release();
  return summary;
}

async function runConcurrently(ops: Array<() => Promise<unknown>>, concurrency: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < ops.length) await ops[next++]();
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, ops.length) }, worker));
}
