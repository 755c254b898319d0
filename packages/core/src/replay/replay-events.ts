import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Etcd3, IRequestOp, IResponseOp } from 'etcd3';
import { OperationError } from '../common/errors.js';
import { freePort } from '../common/free-port.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { EtcdBinaries } from '../etcd/etcd-binaries.js';
import { createEtcdClient } from '../etcd/etcd-client.js';
import { LeaseKeeper } from '../etcd/lease-keeper.js';
import { recordChildPid } from '../etcd/orphan-processes.js';
import { runSnapshotRestore } from '../etcd/snapshot-restore-command.js';
import { openSnapshotStream } from '../etcd/snapshot-stream.js';
import { EtcdProcess } from '../etcd/spawned-etcd.js';
import type { DeltaEvent } from '../format/delta-format.js';
import type { Revision } from '../format/delta-revisions.js';
import { FullSnapshotCheck, type FullSnapshotFacts } from '../format/full-snapshot-check.js';
import type { ReplayEngine } from './replay-engine.js';

/** How large one txn may be: the private etcd is started with these, and a revision that exceeds them fails. */
export interface TxnLimits {
  maxTxnOps: number;
  maxRequestBytes: number;
}

/** ebr's defaults for its embedded etcd, so that stores ebr restored restore here too. */
export const DEFAULT_TXN_LIMITS: TxnLimits = { maxTxnOps: 10 * 1024, maxRequestBytes: 10 * 1024 * 1024 };

/**
 * A lease granted during replay for a lease ID the full snapshot does not have: the events name the lease but
 * not its TTL. One hour outlives any replay; afterwards it is the longest such a key can outlive its owner.
 */
export const DEFAULT_REPLAYED_LEASE_TTL = 3600;

/**
 * Applies revisions to an etcd over gRPC: each revision is one txn of its events in their original order, so
 * every key gets its original mod revision, create revision and version. Each txn is checked as it lands —
 * the revision etcd gave it, and for every key the version and create revision it had before — so a
 * replica that drifted from the source (a lease expiry, a missing delta, the wrong full snapshot) fails
 * at the first difference instead of shifting every later revision.
 */
export class EventReplayer {
  constructor(
    private readonly client: Etcd3,
    private readonly leases: LeaseKeeper,
    private readonly limits: TxnLimits = DEFAULT_TXN_LIMITS,
    private readonly leaseTtl = DEFAULT_REPLAYED_LEASE_TTL,
  ) {}

  async apply(rev: Revision): Promise<void> {
    checkLimits(rev, this.limits);
    for (const e of rev.events) {
      // A lease grant makes no revision, so granting here keeps the revisions aligned.
      if (e.type === 'put' && e.lease !== '0' && !this.leases.has(e.lease)) await this.grant(e.lease);
    }
    const res = await this.client.kv.txn({ compare: [], success: rev.events.map(requestOp), failure: [] });
    const landed = Number(res.header.revision);
    if (landed !== rev.revision) {
      throw new OperationError(
        `replaying revision ${rev.revision} produced revision ${landed}: the private etcd drifted from the source (a write from elsewhere, or a lease expiry)`,
      );
    }
    rev.events.forEach((e, i) => {
      checkPrevious(rev.revision, e, res.responses[i]);
    });
  }

  private async grant(id: string): Promise<void> {
    try {
      await this.client.leaseClient.leaseGrant({ ID: id, TTL: this.leaseTtl });
    } catch (err) {
      if (!/lease already exists/.test((err as Error).message)) throw err;
    }
    this.leases.add(id);
  }
}

function requestOp(e: DeltaEvent): IRequestOp {
  if (e.type === 'delete') return { request_delete_range: { key: e.key, prev_kv: true } };
  return { request_put: { key: e.key, value: e.value, lease: e.lease === '0' ? undefined : e.lease, prev_kv: true } };
}

/** A revision is never split: its parts would land on different revisions and shift every later one. */
function checkLimits(rev: Revision, limits: TxnLimits): void {
  const bytes = rev.events.reduce((sum, e) => sum + e.key.length + e.value.length + 32, 64);
  if (rev.events.length > limits.maxTxnOps || bytes > limits.maxRequestBytes) {
    throw new OperationError(
      `revision ${rev.revision} has ${rev.events.length} operations (~${bytes} bytes), more than one txn may hold with --max-txn-ops=${limits.maxTxnOps} --max-request-bytes=${limits.maxRequestBytes}; raise them (a revision cannot be split without shifting every later revision)`,
    );
  }
}

function checkPrevious(revision: number, e: DeltaEvent, response: IResponseOp | undefined): void {
  const prev = e.type === 'put' ? response?.response_put?.prev_kv : response?.response_delete_range?.prev_kvs?.[0];
  const key = JSON.stringify(e.key.toString('utf8'));
  const mismatch = (what: string) =>
    new OperationError(
      `replaying revision ${revision}: ${key} ${what}; the full snapshot and the deltas do not belong to the same history`,
    );
  if (e.type === 'delete') {
    if (!prev) throw mismatch('is deleted by the delta but does not exist in the replica');
    return;
  }
  const version = Number(prev?.version ?? 0) + 1;
  const created = prev ? Number(prev.create_revision) : revision;
  if (version !== e.version || created !== e.createRevision) {
    throw mismatch(
      `would get version ${version} (created ${created}), but the delta says ${e.version} (created ${e.createRevision})`,
    );
  }
}

export interface GrpcReplayOptions {
  binaries: EtcdBinaries;
  /** Scratch space for the private etcd's data dir (removed on close). */
  workDir: string;
  limits?: TxnLimits;
  leaseTtl?: number;
  logger?: Logger;
}

/**
 * The simple, obviously correct engine, and the oracle the faster ones are tested against: the full snapshot
 * restored into a private single-member etcd on loopback, every revision applied as a txn over gRPC, and the
 * result taken as a snapshot from that etcd. One round trip per revision.
 */
export class GrpcReplayEngine implements ReplayEngine {
  readonly name = 'grpc';
  private etcd?: EtcdProcess;
  private client?: Etcd3;
  private keeper?: LeaseKeeper;
  private replayer?: EventReplayer;
  private readonly dataDir: string;

  constructor(private readonly options: GrpcReplayOptions) {
    this.dataDir = join(options.workDir, 'replay-etcd');
  }

  async open(base: { file: string; revision: number }): Promise<void> {
    const { binaries, workDir } = this.options;
    const limits = this.options.limits ?? DEFAULT_TXN_LIMITS;
    const logger = this.options.logger ?? silentLogger;
    await mkdir(workDir, { recursive: true });
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    await runSnapshotRestore(binaries, base.file, this.dataDir, {
      name: 'replay',
      initialCluster: `replay=${peerUrl}`,
      initialClusterToken: 'etcd-steward-replay',
      initialAdvertisePeerUrls: peerUrl,
    });
    this.etcd = await EtcdProcess.start({
      binaries,
      name: 'replay',
      dataDir: this.dataDir,
      logFile: join(workDir, 'replay-etcd.log'),
      clientPort,
      peerPort,
      throwaway: true,
      extraArgs: [
        `--max-txn-ops=${limits.maxTxnOps}`,
        `--max-request-bytes=${limits.maxRequestBytes}`,
        // etcd keeps this many raft entries in memory; the default (100,000) would hold most of a large replay.
        '--snapshot-count=10000',
      ],
    });
    await recordChildPid(workDir, 'replay-etcd', this.etcd.pid);
    await this.etcd.waitHealthy();
    this.client = createEtcdClient({ endpoints: [this.etcd.clientUrl] });
    this.keeper = new LeaseKeeper(this.client, logger);
    await this.keeper.start();
    await this.checkpoint(base.revision);
    this.replayer = new EventReplayer(this.client, this.keeper, limits, this.options.leaseTtl);
  }

  async apply(revision: Revision): Promise<void> {
    if (!this.replayer) throw new Error('GrpcReplayEngine.apply before open');
    await this.replayer.apply(revision);
  }

  async checkpoint(expectedRevision: number): Promise<void> {
    const res = await this.client!.kv.range({ key: Buffer.from([0]), count_only: true });
    const revision = Number(res.header.revision);
    if (revision !== expectedRevision) {
      throw new OperationError(`the private etcd is at revision ${revision}, expected ${expectedRevision}`);
    }
  }

  async finish(file: string): Promise<FullSnapshotFacts> {
    const check = new FullSnapshotCheck('the snapshot of the replayed etcd', { spillDir: dirname(file) });
    await pipeline(openSnapshotStream({ endpoints: [this.etcd!.clientUrl] }), check, createWriteStream(file));
    return check.facts();
  }

  async close(): Promise<void> {
    this.keeper?.stop();
    this.client?.close();
    await this.etcd?.stop();
    this.keeper = this.client = this.etcd = this.replayer = undefined;
    await rm(this.dataDir, { recursive: true, force: true });
  }
}
