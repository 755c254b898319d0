import { errorMessage, type Logger } from '@etcd-steward/core/common';
import { type EtcdAlarm, type EtcdConnection, listAlarms } from '@etcd-steward/core/etcd';

/** Connections whose last alarm read failed: the failure was said once already. */
const failing = new WeakSet<EtcdConnection>();

/**
 * etcd's alarms, read for the two components that read them on periods of their own (NOSPACE recovery and the
 * CORRUPT fence) from the same etcd through the same connection. A failed read is logged when failures begin, by
 * whichever component reads first, and not again by the other: each failure used to show twice. Undefined when the
 * read failed; the caller keeps its state, and the next period asks again.
 */
export async function readAlarms(connection: EtcdConnection, logger: Logger): Promise<EtcdAlarm[] | undefined> {
  try {
    const alarms = await listAlarms(connection, { timeoutMs: 5_000 });
    failing.delete(connection);
    return alarms;
  } catch (err) {
    // etcd down is the leadership component's to report (once); this says only what it stops.
    if (!failing.has(connection)) logger.warn('cannot read etcd alarms; asking again', { reason: errorMessage(err) });
    failing.add(connection);
    return undefined;
  }
}
