import { errorMessage, OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdConnection } from '../etcd/etcd-client.js';
import { HashKVUnavailableError, type MemberHashKV, memberHashKV } from '../etcd/etcd-maintenance.js';
import { dbHashKV, dbHistory } from '../validation/db-hash-kv.js';
import { findDifference } from './proof-difference.js';
import { type MemberProof, PROOF_EXIT_CODES, type ProofReport } from './proof-verdict.js';

export interface DbProofOptions {
  /** A db file rebuilt from the backups (a restored member's `member/snap/db`). */
  dbFile: string;
  /** The live cluster: every endpoint is asked. */
  connection: EtcdConnection;
  /** Scratch space for the key index's sorted runs. */
  tmpDir: string;
  logger?: Logger;
  signal?: AbortSignal;
}

/**
 * Proves a db rebuilt from backups against the live cluster (docs/proof.md): every member is asked for its
 * HashKV at the db's revision, and the db's own is computed from the file (validation/db-hash-kv.ts) as compacted
 * where the member was. Equal hashes mean the backup holds exactly the cluster's history from the member's
 * compaction to that revision: every key, value, version, create revision and lease, and every write between.
 * Where they differ, the first differing key and revision are looked for (proof-difference.ts).
 */
export async function proveDbAgainstCluster(options: DbProofOptions): Promise<ProofReport> {
  const logger = options.logger ?? silentLogger;
  const { revision, compactRevision: backupCompactRevision } = dbHistory(options.dbFile);
  const base: Pick<ProofReport, 'revision' | 'backupCompactRevision' | 'members' | 'unreachable'> = {
    revision,
    backupCompactRevision,
    members: [],
  };
  const unprovable = (reason: string, extra: Partial<ProofReport> = {}): ProofReport => ({
    ...base,
    ...extra,
    verdict: 'unprovable',
    reason,
    exitCode: PROOF_EXIT_CODES.unprovable,
  });

  const answers: MemberHashKV[] = [];
  // A member down does not stop the proof: the others prove the same history (etcd's corruption check compares
  // them). Those that did not answer are reported; none answering is a failure.
  const unreachable: Array<{ endpoint: string; reason: string }> = [];
  for (const endpoint of options.connection.endpoints) {
    options.signal?.throwIfAborted();
    try {
      answers.push(await memberHashKV(options.connection, revision, { endpoint }));
    } catch (err) {
      if (!(err instanceof HashKVUnavailableError)) {
        logger.warn('a member did not answer for its hash', { endpoint, reason: errorMessage(err) });
        unreachable.push({ endpoint, reason: errorMessage(err) });
        continue;
      }
      return unprovable(
        err.reason === 'compacted'
          ? `etcd at ${endpoint} has compacted its history past the backup's revision ${revision}: prove a newer backup (the sidecar's next delta), or prove within the cluster's compaction interval`
          : `etcd at ${endpoint} has not reached the backup's revision ${revision}: the backup is ahead of the cluster (another cluster's store, or the cluster was restored to an earlier state)`,
      );
    }
  }
  if (answers.length === 0) {
    throw new OperationError(
      `no member answered for its hash: ${unreachable.map((u) => `${u.endpoint}: ${u.reason}`).join('; ')}`,
    );
  }
  if (unreachable.length > 0) base.unreachable = unreachable;
  const clusterIds = new Set(answers.map((a) => a.clusterId));
  if (clusterIds.size > 1) {
    throw new OperationError(
      `the endpoints belong to more than one cluster (${[...clusterIds].join(', ')}): give the members of one`,
    );
  }
  const clusterId = answers[0]?.clusterId;
  const lowest = Math.min(...answers.map((a) => a.compactRevision));
  if (lowest < backupCompactRevision) {
    return unprovable(
      `the backup's full snapshot was compacted at revision ${backupCompactRevision}, the cluster only at ${lowest}: the backup no longer holds the revisions between, which etcd's hash covers. It proves once the cluster has compacted past ${backupCompactRevision} (etcd's auto-compaction, or etcd-compact's next run from an older full snapshot)`,
      { clusterId, compactRevision: lowest },
    );
  }

  const started = Date.now();
  const hashes = new Map<number, { hash: number; rows: number }>();
  const members: MemberProof[] = answers.map((answer) => {
    let mine = hashes.get(answer.compactRevision);
    if (!mine) {
      mine = dbHashKV(options.dbFile, { revision, compactRevision: answer.compactRevision, tmpDir: options.tmpDir });
      hashes.set(answer.compactRevision, mine);
    }
    return {
      endpoint: answer.endpoint,
      memberId: answer.memberId,
      hash: answer.hash,
      compactRevision: answer.compactRevision,
      backupHash: mine.hash,
      equal: mine.hash === answer.hash,
    };
  });
  const hashMs = Date.now() - started;
  const rows = hashes.get(lowest)?.rows;
  const report = { ...base, members, clusterId, compactRevision: lowest, rows, hashMs };
  logger.info('hashed the backup', { revision, compactRevision: lowest, rows, ms: hashMs });
  const differing = members.find((m) => !m.equal);
  if (!differing) return { ...report, verdict: 'proven', exitCode: PROOF_EXIT_CODES.proven };

  logger.warn('the backup differs from the cluster: looking for the first difference', {
    endpoint: differing.endpoint,
    revision,
  });
  const difference = await findDifference({
    dbFile: options.dbFile,
    connection: { ...options.connection, endpoints: [differing.endpoint] },
    revision,
    compactRevision: differing.compactRevision,
    tmpDir: options.tmpDir,
    signal: options.signal,
  });
  const foreign = difference.revisionsCompared > 0 && difference.revisionsSame === 0;
  const where = [
    difference.key
      ? `key ${difference.key.key}: cluster ${difference.key.cluster}, backup ${difference.key.backup}`
      : '',
    difference.revision
      ? `revision ${difference.revision.revision}: cluster ${difference.revision.cluster}, backup ${difference.revision.backup}`
      : '',
  ]
    .filter(Boolean)
    .join('; ');
  const hashLine = `etcd at ${differing.endpoint} hashes revision ${revision} (compacted at ${differing.compactRevision}) as ${differing.hash}, the backup as ${differing.backupHash}`;
  return {
    ...report,
    verdict: foreign ? 'foreign' : 'mismatch',
    difference,
    reason: foreign
      ? `no revision of ${difference.revisionsCompared} since the cluster's compaction is the same in the backup: the store holds another cluster's history (or this cluster was rebuilt); ${hashLine}${where ? `; first difference at ${where}` : ''}`
      : `${hashLine}${where ? `; first difference at ${where}` : '; no differing key or revision found (rows the history no longer shows)'}`,
    exitCode: foreign ? PROOF_EXIT_CODES.foreign : PROOF_EXIT_CODES.mismatch,
  };
}
