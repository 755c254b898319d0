// One measured run of etcd-compact (the process tree's time and memory, per phase from its log lines), optionally in
// a memory cgroup. compact.ts and run.ts use it.
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { type Measurement, measure } from './measure.ts';

const root = new URL('../..', import.meta.url).pathname;

/** etcd-compact's phases, from its JSON log lines. */
export function compactPhase(line: string): string | undefined {
  const msg = /"msg":"([^"]*)"/.exec(line)?.[1];
  const phases: Record<string, string> = {
    'taking the store lock': 'store lock (settle)',
    'restoring the chain to fold': 'restore: download',
    replay: 'restore: replay deltas',
    'verifying the result': 'restore: verify',
    restored: 'restore: done',
    'starting etcd on the restored chain': 'start private etcd',
    'compacting the history': 'compact',
    defragmenting: 'defragment',
    snapshot: 'snapshot',
    'verifying the compacted snapshot': 'verify snapshot',
    'storing the compacted snapshot': 'store',
  };
  return msg === undefined ? undefined : phases[msg];
}

/** `from` for measureCompaction: this checkout, compacting in a private etcd. */
export const ETCD_ENGINE = 'etcd engine';

export interface CompactionSummary {
  revisionsFolded: number;
  chainBytes: number;
  snapshotBytes: number;
}

/**
 * etcd-compact (as built in the checkout `from`, this one by default; or this checkout's compaction with the
 * etcd engine, `from` 'etcd engine': compact-etcd-engine.ts) of the store in `storeDir`, its work dir inside
 * `workDir`, measured (in a cgroup given `limit`).
 */
export async function measureCompaction(
  storeDir: string,
  workDir: string,
  limit?: number,
  from = root,
): Promise<{ run: Measurement; result?: CompactionSummary }> {
  const compactWork = join(workDir, `compact-work-${randomBytes(4).toString('hex')}`);
  await mkdir(compactWork, { recursive: true });
  const args =
    from === ETCD_ENGINE
      ? [join(root, 'scripts/bench/compact-etcd-engine.ts'), `file://${storeDir}`, compactWork]
      : [
          join(from, 'packages/compact/bin/etcd-compact.js'),
          ...['--store', `file://${storeDir}`, '--work-dir', compactWork, '--output', 'json'],
        ];
  const run = await measure(process.execPath, args, { phaseOf: compactPhase, memoryLimitBytes: limit });
  return { run, result: run.code === 0 ? JSON.parse(run.stdout) : undefined };
}
