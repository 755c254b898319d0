import { StewardError } from '../common/errors.js';

/**
 * What a proof against the live cluster concluded (docs/proof.md):
 * - `proven`: every member's HashKV at the backup's revision equals the backup's;
 * - `mismatch`: a member's differs: the backup does not hold the cluster's history;
 * - `foreign`: it differs, and no revision since the cluster's compaction is the same in both: another cluster's
 *   store (or this cluster was rebuilt);
 * - `unprovable`: no member can hash the backup's revision as the backup holds it (compacted past it, not there
 *   yet, or compacted less than the backup's full snapshot was).
 */
export type ProofVerdict = 'proven' | 'mismatch' | 'foreign' | 'unprovable';

/** Exit codes of a program that proves (besides 1, the proof itself failed, and 2, bad usage). */
export const PROOF_EXIT_CODES = {
  proven: 0,
  /** The store's newest revision does not restore: a delta is missing or damaged (as `verify`). */
  notRestorable: 3,
  mismatch: 4,
  unprovable: 5,
  foreign: 6,
} as const;

/** One member's answer, against the backup's hash. */
export interface MemberProof {
  endpoint: string;
  memberId: string;
  hash: number;
  /** The compaction the member hashed as. */
  compactRevision: number;
  /** The backup's hash as compacted at that revision. */
  backupHash: number;
  equal: boolean;
}

/** Where the backup and the cluster first differ, as far as could be told. */
export interface ProofDifference {
  /** The first key, in key order, whose state at the proven revision differs, and how. */
  key?: { key: string; cluster: string; backup: string };
  /** The first revision since the compaction whose writes differ, and the keys written there. */
  revision?: { revision: number; cluster: string; backup: string };
  /** Revisions in (compactRevision, revision] compared, and how many were the same in both. */
  revisionsCompared: number;
  revisionsSame: number;
}

export interface ProofReport {
  verdict: ProofVerdict;
  /** The backup's revision: the one proven, or asked about. */
  revision: number;
  /** The cluster's compaction the hashes were taken as (0: none). */
  compactRevision?: number;
  /** The compaction the backup's full snapshot went through (0: none). */
  backupCompactRevision: number;
  clusterId?: string;
  members: MemberProof[];
  /** Members that did not answer (down, unreachable): the proof stands on the others. */
  unreachable?: Array<{ endpoint: string; reason: string }>;
  /** Why the verdict is not `proven`, in words. */
  reason?: string;
  difference?: ProofDifference;
  /** `key` rows the backup's hash covered, and how long it took to compute. */
  rows?: number;
  hashMs?: number;
  exitCode: number;
}

/** A proof that did not prove: the report travels with it, and the exit code is its verdict's. */
export class ProofError extends StewardError {
  constructor(readonly report: ProofReport) {
    super(`the backup is not proven against the cluster: ${report.reason ?? report.verdict}`, report.exitCode);
  }
}
