import { OperationError } from '../common/errors.js';
import type { Revision } from '../format/delta-revisions.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';

/**
 * A way to carry a full snapshot forward through delta revisions. Every engine must produce the same
 * result — keys, values, create and mod revisions, versions and leases identical to the source's at each
 * revision — which the fingerprint tests check engine against engine.
 */
export interface ReplayEngine {
  readonly name: string;
  /**
   * Starts from a verified full snapshot file (db plus sha256 trailer) whose content is at `revision`; after
   * `prepare`, takes it as the base of the revisions applied so far, or fails with a BaseNotAsPreparedError.
   */
  open(base: { file: string; revision: number }): Promise<void>;
  /**
   * Only engines whose new rows do not depend on the base (the direct engine: etcd's `key` bucket is keyed by
   * revision, so every new row goes after every row of the base): takes revisions before the base is in, writing
   * their pages into `file` from page `firstPgid` on, past the end of the base that is being written into the same
   * file from its start, which must be at `revision` and have pages of `pageSize` bytes.
   */
  prepare?(early: PreparedBase): Promise<void>;
  /**
   * Applies one revision; it must land on exactly `revision.revision`. An engine that applies it at once returns
   * nothing: no await, a microtask a revision, for the caller to pay.
   */
  apply(revision: Revision): Promise<void> | undefined;
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

/** Where an engine that prepares (ReplayEngine.prepare) writes before its base is in, and what it assumes of it. */
export interface PreparedBase {
  file: string;
  revision: number;
  firstPgid: number;
  pageSize: number;
}

/**
 * The base turned out other than `prepare` assumed (a full snapshot holding a later revision than its name, a db with
 * other pages): the revisions applied before it are of no use, and the chain is replayed again without preparing.
 */
export class BaseNotAsPreparedError extends OperationError {}
