import { Readable } from 'node:stream';
import { OperationError } from '../common/errors.js';
import { ObjectNotFoundError, type SnapStore } from '../store/snapstore.js';

/**
 * Where the restore drill leaves its result: `proofs/` beside `v2/`, which neither we nor ebr list (ebr reads only
 * paths that hold `v1` or `v2`, and the name is no snapshot's), as `forks/` (set-aside.ts). One small object,
 * replaced by each drill; the sidecar reads it for its metrics.
 */
export const PROOF_RECORD = 'proofs/latest.json';

/** How a drill ended: a proof's verdict (proof/proof-verdict.ts), or the drill could not get that far. */
export const DRILL_OUTCOMES = ['proven', 'mismatch', 'foreign', 'unprovable', 'not-restorable', 'failed'] as const;
export type DrillOutcome = (typeof DRILL_OUTCOMES)[number];

/** The restore drill's record: its last outcome, the last revision it proved, and its failures so far. */
export interface ProofRecord {
  version: 1;
  /** The last drill. */
  checkedAt: string;
  outcome: DrillOutcome;
  /** The revision the last drill restored (or tried to prove), when it got that far. */
  revision?: number;
  reason?: string;
  /** The newest revision a drill proved, and when. */
  provenRevision?: number;
  provenAt?: string;
  /** Drills that ended in each outcome other than `proven`, since the record began. */
  failures: Partial<Record<Exclude<DrillOutcome, 'proven'>, number>>;
}

/** The record is small; anything larger is not ours. */
const MAX_BYTES = 64 << 10;

/** The store's drill record, or undefined when no drill wrote one. Rejects one that is not a record. */
export async function readProofRecord(store: SnapStore): Promise<ProofRecord | undefined> {
  let body: Readable;
  try {
    body = await store.get(PROOF_RECORD);
  } catch (err) {
    if (err instanceof ObjectNotFoundError) return undefined;
    throw err;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BYTES) {
      body.destroy();
      throw new OperationError(`${store.location}/${PROOF_RECORD} is over ${MAX_BYTES} bytes: not a drill record`);
    }
    chunks.push(chunk);
  }
  return parseProofRecord(Buffer.concat(chunks).toString('utf8'), `${store.location}/${PROOF_RECORD}`);
}

/** A record from its JSON, every field checked (the store is input like any other). */
export function parseProofRecord(text: string, source: string): ProofRecord {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new OperationError(`${source} is not JSON: ${(err as Error).message}`);
  }
  const bad = (what: string) => new OperationError(`${source} is not a drill record: ${what}`);
  if (typeof raw !== 'object' || raw === null) throw bad('not an object');
  const r = raw as Record<string, unknown>;
  if (r.version !== 1) throw bad(`version ${String(r.version)}, this program reads 1`);
  const time = (v: unknown, name: string) => {
    if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) throw bad(`${name} is not a time`);
    return v;
  };
  const revision = (v: unknown, name: string) => {
    if (!Number.isSafeInteger(v) || (v as number) < 0) throw bad(`${name} is not a revision`);
    return v as number;
  };
  if (!DRILL_OUTCOMES.includes(r.outcome as DrillOutcome)) throw bad(`outcome ${String(r.outcome)}`);
  const failures: ProofRecord['failures'] = {};
  if (typeof r.failures !== 'object' || r.failures === null) throw bad('no failures');
  for (const [outcome, count] of Object.entries(r.failures)) {
    if (outcome === 'proven' || !DRILL_OUTCOMES.includes(outcome as DrillOutcome)) throw bad(`failures.${outcome}`);
    failures[outcome as keyof ProofRecord['failures']] = revision(count, `failures.${outcome}`);
  }
  return {
    version: 1,
    checkedAt: time(r.checkedAt, 'checkedAt'),
    outcome: r.outcome as DrillOutcome,
    ...(r.revision === undefined ? {} : { revision: revision(r.revision, 'revision') }),
    ...(typeof r.reason === 'string' ? { reason: r.reason.slice(0, 4096) } : {}),
    ...(r.provenRevision === undefined ? {} : { provenRevision: revision(r.provenRevision, 'provenRevision') }),
    ...(r.provenAt === undefined ? {} : { provenAt: time(r.provenAt, 'provenAt') }),
    failures,
  };
}

/** The record after one more drill. */
export function nextProofRecord(
  previous: ProofRecord | undefined,
  drill: { outcome: DrillOutcome; revision?: number; reason?: string },
  now = new Date(),
): ProofRecord {
  const failures = { ...(previous?.failures ?? {}) };
  if (drill.outcome !== 'proven') failures[drill.outcome] = (failures[drill.outcome] ?? 0) + 1;
  const proven = drill.outcome === 'proven' && drill.revision !== undefined;
  return {
    version: 1,
    checkedAt: now.toISOString(),
    outcome: drill.outcome,
    ...(drill.revision === undefined ? {} : { revision: drill.revision }),
    ...(drill.reason ? { reason: drill.reason.slice(0, 4096) } : {}),
    ...(proven
      ? { provenRevision: drill.revision, provenAt: now.toISOString() }
      : previous?.provenRevision !== undefined
        ? { provenRevision: previous.provenRevision, provenAt: previous.provenAt }
        : {}),
    failures,
  };
}

/** Replaces the store's drill record (a put is atomic in every provider). */
export async function writeProofRecord(store: SnapStore, record: ProofRecord): Promise<void> {
  await store.put(PROOF_RECORD, Readable.from([Buffer.from(`${JSON.stringify(record, null, 2)}\n`)]));
}
