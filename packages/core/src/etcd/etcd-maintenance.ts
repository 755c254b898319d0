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

/** What a member answered to Maintenance/HashKV. */
export interface MemberHashKV {
  endpoint: string;
  /** Member and cluster IDs (uint64s as decimal strings), from the response header. */
  memberId: string;
  clusterId: string;
  /** The member's current revision when it answered. */
  currentRevision: number;
  /** CRC-32C of its MVCC rows at the revision asked (docs/proof.md has the rule). */
  hash: number;
  /** The compaction the hash was taken as. */
  compactRevision: number;
}

/** Why a member cannot hash a revision: compacted past it, or not there yet. */
export class HashKVUnavailableError extends OperationError {
  constructor(
    readonly endpoint: string,
    readonly reason: 'compacted' | 'future',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Maintenance/HashKV `HashKVRequest{1 revision}` → `HashKVResponse{1 header, 2 hash, 3 compact_revision}`: the
 * hash etcd's own corruption check compares between members. The general client lacks this call
 * (docs/developer.md, Talking to etcd). etcd answers "compacted" for a revision below its compaction (3.4: at it
 * too) and "future revision" past its own.
 */
export async function memberHashKV(
  conn: EtcdConnection,
  revision: number,
  options: MaintenanceCallOptions = {},
): Promise<MemberHashKV> {
  const endpoint = options.endpoint ?? conn.endpoints[0];
  let response: Buffer;
  try {
    response = await maintenanceCall(conn, '/etcdserverpb.Maintenance/HashKV', writeMessage([[1, revision]]), {
      ...options,
      endpoint,
      timeoutMs: options.timeoutMs ?? 120_000,
    });
  } catch (err) {
    const message = errorMessage(err);
    if (/required revision has been compacted/.test(message)) {
      throw new HashKVUnavailableError(endpoint, 'compacted', `etcd at ${endpoint} has compacted revision ${revision}`);
    }
    if (/future revision/.test(message)) {
      throw new HashKVUnavailableError(endpoint, 'future', `etcd at ${endpoint} has not reached revision ${revision}`);
    }
    throw err;
  }
  const fields = readFields(response);
  const header = readFields(fields.find((f) => f.field === 1)?.bytes ?? Buffer.alloc(0));
  const varint = (list: typeof fields, n: number) => list.find((f) => f.field === n)?.varint ?? 0n;
  return {
    endpoint,
    clusterId: String(varint(header, 1)),
    memberId: String(varint(header, 2)),
    currentRevision: Number(varint(header, 3)),
    hash: Number(varint(fields, 2)),
    // int64, -1 before any compaction
    compactRevision: Math.max(0, Number(BigInt.asIntN(64, varint(fields, 3)))),
  };
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
