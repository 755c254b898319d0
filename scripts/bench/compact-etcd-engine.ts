// etcd-compact's work done with the etcd engine (a private etcd compacts and defragments the restored chain, as
// ebr's embedded etcd does): the reference compact.ts measures the default, direct engine against, on a copy of
// the same store. Not a program: the engine is no user's choice. Prints the result as etcd-compact --output json
// does, its JSON log lines on stderr.
// Usage: node scripts/bench/compact-etcd-engine.ts STORE_URL WORK_DIR
import { compactChain, createLogger } from '@etcd-steward/core';

const [store, workDir] = process.argv.slice(2);
const result = await compactChain({
  store,
  workDir,
  engine: 'etcd',
  defragment: true,
  snapshotTimeoutMs: 30 * 60_000,
  defragTimeoutMs: 8 * 60_000,
  compression: 'zstd',
  lockTtlMs: 120_000,
  logger: createLogger({ json: true }),
});
process.stdout.write(`${JSON.stringify(result)}\n`);
