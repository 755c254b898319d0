import { errorMessage, OperationError } from '../common/errors.js';
import { ProtoCursor, writeMessage } from '../common/protobuf-wire.js';
import type { DeltaEvent } from '../format/delta-format.js';
import type { EtcdConnection } from './etcd-client.js';
import { etcdAuthToken, grpcCall, LEAN_READ_BUFFERS } from './etcd-grpc.js';
import { memberStatus } from './etcd-status.js';

/** What one watch response delivered: whole revisions, in order. */
export interface WatchBatch {
  /** Empty for a progress notification. */
  events: DeltaEvent[];
  /** Every revision up to this one has now been delivered. */
  revision: number;
  /**
   * Its events were read back from etcd's history, not received as etcd wrote them: etcd had already written them
   * when the watch was created (it started from an older revision), had newer ones when it sent them (the watch
   * was catching up, or had fallen behind), or wrote them before the caller, after a pause of over a second (PAUSE_MS),
   * asked for more. Their times are then when they were read, later than when they happened.
   */
  readBack: boolean;
}

/** etcd has compacted away revisions the watch asked for: only a full snapshot can cover them now. */
export class WatchCompactedError extends OperationError {
  constructor(
    readonly fromRevision: number,
    readonly compactRevision: number,
  ) {
    super(`etcd has compacted its history to revision ${compactRevision}; revision ${fromRevision} is gone`);
  }
}

/**
 * A caller that takes longer than this to ask for the next batch may have left etcd's responses waiting in buffers:
 * they would come stamped late but look live. So after such a pause, what etcd wrote by then counts as read back.
 */
const PAUSE_MS = 1_000;

const EVERY_KEY = Buffer.from([0]);
const EMPTY = Buffer.alloc(0);

/**
 * Every change to the whole keyspace from `fromRevision` on, as etcd's Watch stream sends it, read over plain
 * HTTP/2 (etcd-grpc.ts) rather than etcd3's Watcher. That one resumes after a reconnect from the response
 * header's revision, which during a catch-up is etcd's current revision, so it would silently skip revisions;
 * it also drops the compact revision of a cancelled watch, and its client costs ~45 MB to load. Here a broken
 * stream ends the iteration with an error, and the caller resumes from the last revision it kept.
 *
 * The stream is read only as fast as the caller pulls, so HTTP/2 flow control holds etcd back while the caller
 * is busy. etcd ends each response at a revision boundary (mvcc's eventBatch), so a revision's events never
 * straddle two batches.
 */
export async function* watchRevisions(
  conn: EtcdConnection,
  fromRevision: number,
  options: { signal?: AbortSignal; now?: () => Date } = {},
): AsyncGenerator<WatchBatch> {
  options.signal?.throwIfAborted();
  const endpoint = conn.endpoints[0];
  // With etcd auth a watch needs a token, which etcd checks when the watch is created.
  const token = await etcdAuthToken(conn, endpoint);
  const call = grpcCall(conn, '/etcdserverpb.Watch/Watch', watchCreateRequest(fromRevision), {
    signal: options.signal,
    token,
    // A response catching up holds up to 1000 revisions (~1 MB of 1 KiB values): decoding more of them ahead of
    // a busy reader would only hold them in memory, where etcd keeps them anyway.
    readAhead: 1,
    readBuffersPerCollection: LEAN_READ_BUFFERS,
  });
  // The newest revision etcd is known to have had while this watch had not delivered it: events up to it were read
  // back. etcd sends a watch's first events, and those of a watch that fell behind, from its history with its
  // current revision in the header; a live event comes with its own revision there. Events are stamped as they
  // are decoded, when the caller asks for them (PAUSE_MS).
  let behind = 0;
  try {
    for await (const message of call.messages as AsyncIterable<Buffer>) {
      let res: WatchResponse;
      try {
        res = readWatchResponse(message, (options.now?.() ?? new Date()).toISOString());
      } catch (err) {
        throw new OperationError(`etcd at ${endpoint} sent a malformed watch response: ${errorMessage(err)}`);
      }
      if (res.canceled) {
        if (res.compactRevision > 0) throw new WatchCompactedError(fromRevision, res.compactRevision);
        throw new OperationError(`etcd at ${endpoint} cancelled the watch: ${res.cancelReason || 'no reason given'}`);
      }
      if (res.created) {
        behind = res.headerRevision;
        continue;
      }
      const revision = res.events.length > 0 ? res.events[res.events.length - 1].modRevision : res.headerRevision;
      const readBack = res.events.length > 0 && (res.events[0].modRevision <= behind || res.headerRevision > revision);
      behind = Math.max(behind, res.headerRevision);
      const handed = Date.now();
      yield { events: res.events, revision, readBack };
      if (Date.now() - handed > PAUSE_MS) {
        const now = await memberStatus(conn, { endpoint, token, timeoutMs: 10_000 });
        behind = Math.max(behind, now.revision);
      }
    }
    throw new OperationError(`etcd at ${endpoint} closed the watch stream`);
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason;
    throw err;
  } finally {
    call.close();
  }
}

interface WatchResponse {
  headerRevision: number;
  created: boolean;
  canceled: boolean;
  compactRevision: number;
  cancelReason: string;
  events: DeltaEvent[];
}

/** WatchRequest{1 create_request: WatchCreateRequest{1 key, 2 range_end, 3 start_revision, 4 progress_notify}}. */
function watchCreateRequest(fromRevision: number): Buffer {
  const create = writeMessage([
    [1, EVERY_KEY],
    [2, EVERY_KEY],
    [3, fromRevision],
    [4, 1],
  ]);
  return writeMessage([[1, create]]);
}

/** WatchResponse{1 header{3 revision}, 3 created, 4 canceled, 5 compact_revision, 6 cancel_reason, 11 events}. */
function readWatchResponse(message: Buffer, time: string): WatchResponse {
  const res: WatchResponse = {
    headerRevision: 0,
    created: false,
    canceled: false,
    compactRevision: 0,
    cancelReason: '',
    events: [],
  };
  for (const f = new ProtoCursor(message); f.next(); ) {
    if (f.wire === 2) {
      if (f.field === 1) {
        for (const header = f.embedded(); header.next(); ) if (header.field === 3) res.headerRevision = header.value;
      } else if (f.field === 6) res.cancelReason = f.bytes().toString('utf8');
      else if (f.field === 11) res.events.push(readEvent(f.embedded(), time));
    } else if (f.wire === 0) {
      if (f.field === 3) res.created = f.value === 1;
      else if (f.field === 4) res.canceled = f.value === 1;
      else if (f.field === 5) res.compactRevision = f.value;
    }
  }
  return res;
}

/**
 * Event{1 type (0 PUT, 1 DELETE), 2 kv: KeyValue{1 key, 2 create_revision, 3 mod_revision, 4 version, 5 value, 6 lease}},
 * read in place: key and value are views of the response, and nothing else is allocated but the event.
 */
function readEvent(fields: ProtoCursor, time: string): DeltaEvent {
  const event: DeltaEvent = {
    type: 'put',
    key: EMPTY,
    value: EMPTY,
    createRevision: 0,
    modRevision: 0,
    version: 0,
    lease: '0',
    time,
  };
  while (fields.next()) {
    if (fields.field === 1 && fields.wire === 0) event.type = fields.value === 1 ? 'delete' : 'put';
    if (fields.field !== 2 || fields.wire !== 2) continue;
    for (const kv = fields.embedded(); kv.next(); ) {
      if (kv.wire === 2) {
        if (kv.field === 1) event.key = kv.bytes();
        else if (kv.field === 5) event.value = kv.bytes();
      } else if (kv.wire === 0) {
        if (kv.field === 2) event.createRevision = kv.value;
        else if (kv.field === 3) event.modRevision = kv.value;
        else if (kv.field === 4) event.version = kv.value;
        else if (kv.field === 6) event.lease = String(BigInt.asIntN(64, kv.bigint()));
      }
    }
  }
  if (event.modRevision === 0) throw new Error('an event without a mod_revision');
  return event;
}
