import { errorMessage, OperationError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { readFields, writeMessage } from '../common/protobuf-wire.js';
import { createEtcdClient, type EtcdConnection } from '../etcd/etcd-client.js';
import { etcdAuthToken, grpcUnary } from '../etcd/etcd-grpc.js';

/** Where the sidecars' locks live in etcd: `<prefix><job>/<lease>` (the keys etcd's lock service writes). */
export const ETCD_LOCK_PREFIX = 'etcd-steward/lock/';

export interface EtcdLockOptions {
  /** The lock's lease: a holder that stops renewing loses the lock this long after. */
  ttlSeconds: number;
  /** How long to wait for the lock; an OperationError when another holder keeps it longer. */
  waitMs: number;
  logger: Logger;
}

/** A held lock: the job runs while `signal` is not aborted, and releases it at the end. */
export interface EtcdLockHold {
  /** The key etcd's lock service wrote for this holder. */
  readonly key: string;
  /** Aborted when the lease is lost (etcd unreachable for a TTL, or the lease revoked): the job must stop. */
  readonly signal: AbortSignal;
  release(): Promise<void>;
}

/**
 * Takes the lock `job` of the cluster with etcd's own lock service (v3lockpb.Lock, the etcdctl lock one) on a
 * lease of our own that the client keeps alive: one holder at a time, the lock goes with its holder's lease
 * when the holder dies, and a holder that loses its lease is told so through `signal`.
 */
export async function acquireEtcdLock(
  conn: EtcdConnection,
  job: string,
  options: EtcdLockOptions,
): Promise<EtcdLockHold> {
  const client = createEtcdClient(conn);
  const lease = client.lease(options.ttlSeconds, { autoKeepAlive: true });
  const lost = new AbortController();
  lease.on('lost', (err) => {
    if (lost.signal.aborted) return;
    options.logger.warn('etcd lock lost: its lease expired or was revoked; stopping the job', {
      job,
      reason: errorMessage(err),
    });
    lost.abort(new OperationError(`the etcd lock of ${job} was lost (${errorMessage(err)})`));
  });
  let released = false;
  const close = async () => {
    released = true;
    lost.abort(new OperationError(`the etcd lock of ${job} was released`));
    // Revoking deletes the lock key with the lease: the next holder need not wait for the TTL.
    await lease.revoke().catch(() => {});
    client.close();
  };
  try {
    const leaseId = await lease.grant();
    const endpoint = conn.endpoints[0];
    const request = writeMessage([
      [1, Buffer.from(`${ETCD_LOCK_PREFIX}${job}`)],
      [2, BigInt(leaseId)],
    ]);
    let response: Buffer;
    try {
      response = await grpcUnary(conn, '/v3lockpb.Lock/Lock', request, {
        endpoint,
        timeoutMs: options.waitMs,
        token: await etcdAuthToken(conn, endpoint),
      });
    } catch (err) {
      throw new OperationError(`cannot take the etcd lock of ${job}: ${errorMessage(err)}`, { cause: err });
    }
    const key = readFields(response)
      .find((f) => f.field === 2)
      ?.bytes?.toString('utf8');
    if (!key) throw new OperationError(`etcd's lock service answered without a key for ${job}`);
    options.logger.info('etcd lock acquired', { job, key });
    return {
      key,
      signal: lost.signal,
      async release() {
        if (released) return;
        await close();
        options.logger.info('etcd lock released', { job, key });
      },
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Runs `work` holding the lock `job`; the lock is released however it ends. */
export async function withEtcdLock<T>(
  conn: EtcdConnection,
  job: string,
  options: EtcdLockOptions,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const hold = await acquireEtcdLock(conn, job, options);
  try {
    return await work(hold.signal);
  } finally {
    await hold.release();
  }
}
