// The benchmarks' dataset: `count` keys shaped as Kubernetes stores ConfigMaps, 100 puts to a txn over 8 writers.
import type { Etcd3 } from '@etcd-steward/core';

export async function loadConfigMaps(client: Etcd3, count: number, value: (i: number) => Buffer): Promise<void> {
  const batch = 100;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const start = next;
      next += batch;
      await client.kv.txn({
        compare: [],
        success: Array.from({ length: Math.min(batch, count - start) }, (_, j) => ({
          request_put: {
            key: Buffer.from(`/registry/configmaps/ns-${(start + j) % 100}/cm-${start + j}`),
            value: value(start + j),
          },
        })),
        failure: [],
      });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}
