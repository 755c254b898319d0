import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { childEntry, runChild } from '../common/child-process.js';
import { IntegrityError, OperationError, UsageError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import { recordChildPid } from '../etcd/orphan-processes.js';
import { type ChainReplayResult, UnusableFullSnapshotError } from '../replay/replay-chain.js';
import type { TxnLimits } from '../replay/replay-events.js';
import { DeltaFeed } from './delta-feed.js';
import type { ReplayMethod } from './replay-method.js';

/** Everything the replay needs, as plain data: it crosses into the replay process. */
export interface IsolatedReplayRequest {
  storeUrl: string;
  /** The key file's path, never its keys: the replay process reads it itself. */
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
  /** This process fetches the deltas and hands their files over (delta-feed.ts), beside the replay. */
  feedDeltas?: boolean;
}

/** The replay's result, with the replay process's peak RSS. */
export type ReplayOutcome = ChainReplayResult & { peakRssBytes: number };

/**
 * V8 flags for the replay process: the young generation small, so that a stream of short-lived events does
 * not grow it (V8 otherwise sizes it to the allocation rate, ~64 MB), and the whole heap capped well above
 * what one revision needs (a txn is at most --max-request-bytes, 10 MiB by default).
 */
const HEAP_FLAGS = ['--max-semi-space-size=4', '--max-old-space-size=384'];

/**
 * Runs replayChain in a child process: its memory is bounded by HEAP_FLAGS, and all of it goes back to the
 * system when it ends — before the result is verified, so the two never add up. (A worker thread would leave its
 * malloc arena behind in this process.) Its pid is recorded in the scratch dir, so that a run after a crash stops it
 * like any other leftover. With `feedDeltas`, this process fetches the deltas meanwhile (delta-feed.ts).
 */
export async function replayInChild(
  request: IsolatedReplayRequest,
  logger: Logger,
  signal?: AbortSignal,
): Promise<ReplayOutcome> {
  const feed = request.feedDeltas
    ? new DeltaFeed({
        storeUrl: request.storeUrl,
        encryptionKeyFile: request.encryptionKeyFile,
        deltas: request.chain.deltas,
        workDir: request.workDir,
        concurrency: request.maxFetchers,
      })
    : undefined;
  try {
    return await runChild<ReplayOutcome>(
      {
        entry: childEntry(import.meta.url, './isolated-replay-process.js'),
        // The scratch dir on its command line lets killRecordedChildren recognise it.
        args: [request.engineDir],
        execArgv: HEAP_FLAGS,
        // one malloc arena, as the full snapshot's child has: its reads run on libuv's threads, each of which
        // would otherwise grow an arena of its own
        env: { ...process.env, MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '1' },
        name: 'the replay process',
        logger,
        signal,
        // It stops its private etcd, if any, before it ends.
        stop: 'message',
        revive,
        started: (pid) => void recordChildPid(request.engineDir, 'replay', pid),
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
    case 'IntegrityError':
      return new IntegrityError(message);
    case 'UsageError':
      return new UsageError(message);
    default:
      return new OperationError(message);
  }
}
