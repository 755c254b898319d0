import { errorMessage, OperationError } from '../common/errors.js';
import { readFields, writeMessage } from '../common/protobuf-wire.js';
import type { EtcdConnection } from './etcd-client.js';
import { etcdAuthToken, grpcUnary } from './etcd-grpc.js';

/** etcd's alarm types (etcdserverpb.AlarmType; 0 is NONE). */
export type AlarmType = 'NOSPACE' | 'CORRUPT';
const ALARM_CODES: Record<AlarmType, number> = { NOSPACE: 1, CORRUPT: 2 };

/** One raised alarm: which member raised it (uint64 as a decimal string) and what. */
export interface EtcdAlarm {
  memberId: string;
  alarm: AlarmType;
}

export interface MaintenanceCallOptions {
  /** The member to ask (default: the first endpoint). */
  endpoint?: string;
  timeoutMs?: number;
}

/**
 * Maintenance/Defragment of one member: etcd rewrites its db file without the free pages, and the member
 * answers no reads or writes meanwhile (so callers take members one at a time).
 */
export async function defragmentMember(conn: EtcdConnection, options: MaintenanceCallOptions = {}): Promise<void> {
  await maintenanceCall(conn, '/etcdserverpb.Maintenance/Defragment', Buffer.alloc(0), options);
}

/** Maintenance/Alarm GET: `AlarmResponse{2 alarms: AlarmMember{1 memberID, 2 alarm}}`, for the whole cluster. */
export async function listAlarms(conn: EtcdConnection, options: MaintenanceCallOptions = {}): Promise<EtcdAlarm[]> {
  const response = await maintenanceCall(conn, '/etcdserverpb.Maintenance/Alarm', Buffer.alloc(0), options);
  const alarms: EtcdAlarm[] = [];
  for (const f of readFields(response)) {
    if (f.field !== 2 || !f.bytes) continue;
    const fields = readFields(f.bytes);
    const code = Number(fields.find((m) => m.field === 2)?.varint ?? 0n);
    const alarm = (Object.keys(ALARM_CODES) as AlarmType[]).find((a) => ALARM_CODES[a] === code);
    if (alarm) alarms.push({ memberId: String(fields.find((m) => m.field === 1)?.varint ?? 0n), alarm });
  }
  return alarms;
}

/**
 * Maintenance/Alarm `AlarmRequest{1 action, 2 memberID, 3 alarm}`: DEACTIVATE (2) clears a member's alarm,
 * ACTIVATE (1) raises one (what etcd itself does; tests use it to raise CORRUPT).
 */
export async function setAlarm(
  conn: EtcdConnection,
  alarm: EtcdAlarm,
  active: boolean,
  options: MaintenanceCallOptions = {},
): Promise<void> {
  const request = writeMessage([
    [1, active ? 1 : 2],
    [2, BigInt(alarm.memberId)],
    [3, ALARM_CODES[alarm.alarm]],
  ]);
  await maintenanceCall(conn, '/etcdserverpb.Maintenance/Alarm', request, options);
}

/**
 * KV/Compact `CompactionRequest{1 revision, 2 physical}`: drops the history before `revision`; physical waits
 * until the freed pages are free in the db, so that a defragmentation right after gives them back.
 * A revision already compacted is not an error: the history is gone either way.
 */
export async function compactHistory(
  conn: EtcdConnection,
  revision: number,
  options: MaintenanceCallOptions = {},
): Promise<void> {
  try {
    await maintenanceCall(
      conn,
      '/etcdserverpb.KV/Compact',
      writeMessage([
        [1, revision],
        [2, 1],
      ]),
      options,
    );
  } catch (err) {
    if (!/required revision has been compacted/.test(errorMessage(err))) throw err;
  }
}

async function maintenanceCall(
  conn: EtcdConnection,
  path: string,
  request: Buffer,
  options: MaintenanceCallOptions,
): Promise<Buffer> {
  const endpoint = options.endpoint ?? conn.endpoints[0];
  const method = path.slice(path.lastIndexOf('/') + 1);
  try {
    return await grpcUnary(conn, path, request, {
      endpoint,
      timeoutMs: options.timeoutMs ?? 10_000,
      token: await etcdAuthToken(conn, endpoint),
    });
  } catch (err) {
    throw new OperationError(`etcd at ${endpoint} refused ${method}: ${errorMessage(err)}`, { cause: err });
  }
}
