import { resultStyle } from '../common/terminal-style.js';

/**
 * What a data-dir check concludes, each with its own exit code so that an init container's caller (or a
 * script) can act on it. 1 stays "the program failed" and 2 "bad usage", as in every program.
 */
export const VERDICTS = {
  valid: { exitCode: 0, wording: 'valid' },
  'restore-needed': { exitCode: 3, wording: 'restore needed' },
  /** Reserved: a member of a multi-member cluster with bad data rejoins it; telling needs the cluster. */
  'rejoin-needed': { exitCode: 4, wording: 'rejoin needed' },
  'wrong-volume': { exitCode: 5, wording: 'wrong volume' },
  'cannot-decide': { exitCode: 6, wording: 'cannot decide' },
} as const;

export type Verdict = keyof typeof VERDICTS;

export type ValidationMode = 'sanity' | 'full';

/** One thing a check noticed. A warning leaves the data dir valid; a problem decides the verdict. */
export interface Finding {
  check: 'safe-guard' | 'layout' | 'db' | 'wal' | 'snap' | 'store';
  severity: 'warning' | 'problem';
  message: string;
}

export interface DataDirReport {
  verdict: Verdict;
  exitCode: number;
  /** Why, in one sentence: the first problem, or what makes the data dir valid. */
  reason: string;
  mode: ValidationMode;
  dataDir: string;
  findings: Finding[];
  db?: {
    revision: number;
    consistentIndex: number;
    pageSize: number;
    pages: number;
    txid: string;
    /** Pages visited by the full-mode walk. */
    pagesWalked?: number;
  };
  wal?: {
    segments: number;
    segmentsRead: number;
    records: number;
    lastSnapshot?: { index: number; term: number };
    hardState?: { term: number; commit: number };
    tornTail: boolean;
    /** The entries past the db's consistent index, which etcd applies at start-up (wal-scan.ts). */
    replay?: { entries: number; committed: number; revisionsAtLeast: number; revisionsAtMost: number };
  };
  /** The revision etcd will serve once started: the db's plus what it replays from the WAL (served-revision.ts). */
  served?: { atLeast: number; atMost: number };
  /** The newest raft snapshot file (`member/snap/*.snap`), when there is one. */
  snap?: { file: string; index: number; term: number; files: number };
  store?: { newestRevision?: number; snapshots: number };
}

/** The verdict line: "valid: …", "restore needed: …". */
export function formatVerdict(report: DataDirReport): string {
  const colour = report.verdict === 'valid' ? resultStyle.green : resultStyle.red;
  return `${colour.bold(VERDICTS[report.verdict].wording)}: ${report.reason}\n`;
}
