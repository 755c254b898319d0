import type { SnapshotChain } from '../backup/snapshot-chain.js';
import type { OnRecovered } from '../backup/stored-versions.js';
import { childEntry, runChild } from '../common/child-thread.js';
import { IntegrityError, OperationError, UsageError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import { UnusableFullSnapshotError } from '../replay/chain-source.js';
import type { ChainReplayResult } from '../replay/replay-chain.js';
import { BaseNotAsPreparedError } from '../replay/replay-engine.js';
import type { TxnLimits } from '../replay/replay-events.js';
import { ChainFeed } from './chain-feed.js';
import type { ReplayMethod } from './replay-method.js';

/** Everything the replay needs, as plain data: it crosses into the replay thread. */
export interface IsolatedReplayRequest {
  storeUrl: string;
  /** The key file's path, never its keys: whoever fetches reads it itself. */
  encryptionKeyFile?: string;
  chain: SnapshotChain;
  toRevision?: number;
  /** Scratch for the chain's files, and for the engine (its private etcd, if any). */
  workDir: string;
  engineDir: string;
  method: ReplayMethod;
  binaries: EtcdBinaries;
  limits?: TxnLimits;
  leaseTtl?: number;
  maxFetchers: number;
  allowPartial?: boolean;
  /** Leave the result in the db file the engine extended, where the method can (see replayChain). */
  inPlace?: boolean;
  /** This process fetches the chain and hands its files over (chain-feed.ts), beside the replay. */
  fed?: boolean;
  /** `false`: no revision before the full snapshot is in (replay-chain.ts's `prepare`). */
  prepare?: boolean;
}

/** The replay's result. */
export type ReplayOutcome = ChainReplayResult;

/**
 * The replay thread's heap: a young generation of 12 MB (4 MiB semi-spaces, as etcd-restore's own thread has; V8
 * applies a process's --max-semi-space-size over a worker's limits in any case), where a stream of short-lived
 * events is collected young — 24 and 48 MB measured no faster for the restore or the compaction of the benchmark
 * suite's chain — and the whole heap capped well above what one revision needs (a txn is at most
 * --max-request-bytes, 10 MiB by default).
 */
const HEAP_LIMITS = { maxYoungGenerationSizeMb: 12, maxOldGenerationSizeMb: 384 };

/**
 * Runs replayChain in a worker thread: its heap is bounded by HEAP_LIMITS, and goes back to the system when it ends
 * — before the result is verified, so the two never add up. A thread rather than a process of its own: one Node
 * runtime in memory (a second process mapped another ~50 MB of the `node` binary and took a second start), and
 * this process's one malloc arena for both (the programs that restore run with MALLOC_ARENA_MAX=1). With `fed`,
 * this thread fetches the chain meanwhile (chain-feed.ts), from before the replay thread starts.
 */
export async function replayInChild(
  request: IsolatedReplayRequest,
  logger: Logger,
  signal?: AbortSignal,
  onRecovered?: OnRecovered,
): Promise<ReplayOutcome> {
  const feed = request.fed
    ? new ChainFeed({
        storeUrl: request.storeUrl,
        encryptionKeyFile: request.encryptionKeyFile,
        chain: request.chain,
        workDir: request.workDir,
        concurrency: request.maxFetchers,
        logger,
        onRecovered,
      })
    : undefined;
  try {
    return await runChild<ReplayOutcome>(
      {
        entry: childEntry(import.meta.url, './isolated-replay-process.js'),
        thread: HEAP_LIMITS,
        name: 'the replay thread',
        logger,
        signal,
        revive,
        onMessage: feed?.onMessage,
      },
      request,
    );
  } finally {
    await feed?.stop();
  }
}

/** The child's error as the class callers tell apart (fallback on an unusable full snapshot, exit codes). */
function revive(name: string, message: string): Error {
  switch (name) {
    case 'UnusableFullSnapshotError':
      return new UnusableFullSnapshotError(message);
    case 'BaseNotAsPreparedError':
      return new BaseNotAsPreparedError(message);
    case 'IntegrityError':
      return new IntegrityError(message);
    case 'UsageError':
      return new UsageError(message);
    default:
      return new OperationError(message);
  }
}
