import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import { type EarlyBase, UnusableFullSnapshotError } from '../replay/chain-source.js';

// What the restore's thread (chain-feed.ts) and the replay thread (chain-from-parent.ts) say to each other.

export type Described = { name: string; message: string };
export type FeedMessage =
  | { type: 'early' }
  | { type: 'early-in'; base?: EarlyBase; error?: Described }
  | { type: 'full' }
  | { type: 'full-in'; location: string; facts?: FullSnapshotFacts; error?: Described }
  | { type: 'took'; index: number }
  | { type: 'delta'; index: number; file?: string; error?: Described };

export function described(err: unknown): Described {
  return {
    name: err instanceof UnusableFullSnapshotError ? 'UnusableFullSnapshotError' : ((err as Error)?.name ?? 'Error'),
    message: errorMessage(err),
  };
}

/** The error as replayChain tells them apart: an unusable full snapshot, damage (IntegrityError), a missing object (by name), or other. */
export function revived(error: Described): Error {
  if (error.name === 'UnusableFullSnapshotError') return new UnusableFullSnapshotError(error.message);
  if (error.name === 'IntegrityError') return new IntegrityError(error.message);
  const revived = new OperationError(error.message);
  revived.name = error.name;
  return revived;
}
