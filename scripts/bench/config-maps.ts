// The benchmarks' dataset: `count` keys shaped as Kubernetes stores ConfigMaps, 100 puts to a txn over 8 writers;
// from key `first` on, for a dataset loaded in rounds.
import type { Etcd3 } from '@etcd-steward/core';

export async function loadConfigMaps(
  client: Etcd3,
  count: number,
  value: (i: number) => Buffer,
  first = 0,
): Promise<void> {
  const batch = 100;
  const end = first + count;
  let next = first;
  const worker = async () => {
    while (next < end) {
      const start = next;
      next += batch;
      await client.kv.txn({
        compare: [],
        success: Array.from({ length: Math.min(batch, end - start) }, (_, j) => ({
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
