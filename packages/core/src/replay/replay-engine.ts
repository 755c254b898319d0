import type { Revision } from '../format/delta-revisions.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';

/**
 * A way to carry a full snapshot forward through delta revisions. Every engine must produce the same
 * result — keys, values, create and mod revisions, versions and leases identical to the source's at each
 * revision — which the fingerprint tests check engine against engine.
 */
export interface ReplayEngine {
  readonly name: string;
  /** Starts from a verified full snapshot file (db plus sha256 trailer) whose content is at `revision`. */
  open(base: { file: string; revision: number }): Promise<void>;
  /** Applies one revision; it must land on exactly `revision.revision`. */
  apply(revision: Revision): Promise<void>;
  /** Called after each delta: anything buffered is applied and the store's revision is checked. */
  checkpoint(expectedRevision: number): Promise<void>;
  /** Writes the result as a snapshot file (db plus sha256 trailer), verified, and returns what it holds. */
  finish(file: string): Promise<FullSnapshotFacts>;
  /**
   * Only engines that extend the db file they opened, rather than produce a new one: leaves the result in that
   * file (no trailer) and returns the revision read back from it. The file is not synced: the caller makes it a
   * member data dir's db (see replay-chain.ts) and syncs it before anyone may start etcd on it, while it verifies it.
   */
  finishInPlace?(): Promise<number>;
  /** Releases everything (processes, files); safe to call at any point, more than once. */
  close(): Promise<void>;
}
