import { Transform, type TransformCallback } from 'node:stream';
import { OperationError } from '../common/errors.js';
import { readSmallVarint } from '../common/protobuf-wire.js';
import type { EtcdConnection } from './etcd-client.js';
import { grpcCall, LEAN_READ_BUFFERS } from './etcd-grpc.js';

/**
 * etcd's Maintenance/Snapshot stream as raw bytes (the bbolt db and etcd's sha256 trailer) in chunks of
 * 128 KiB, read over plain HTTP/2 (etcd-grpc.ts). `lean`: memory before speed (LEAN_READ_BUFFERS).
 */
export function openSnapshotStream(
  conn: EtcdConnection,
  options: { signal?: AbortSignal; token?: string; endpoint?: string; lean?: boolean } = {},
): Transform {
  const { lean, ...call } = options;
  return grpcCall(conn, '/etcdserverpb.Maintenance/Snapshot', Buffer.alloc(0), {
    ...call,
    ...(lean ? { readBuffersPerCollection: LEAN_READ_BUFFERS } : {}),
    windowBytes: SNAPSHOT_WINDOW,
    decode: (endpoint) => new SnapshotBlobs(endpoint),
  }).messages;
}

/**
 * What etcd may send ahead of the snapshot's reader. The reader keeps pace with compression, not the network, so a
 * window larger than 1 MiB only holds memory: 4 MiB raised `etcd-snapshot save`'s peak by ~1.5 MB at the same
 * speed (docs/performance.md).
 */
const SNAPSHOT_WINDOW = 1 << 20;

/**
 * Every chunk into compression costs a call per stage; 128 KiB chunks get most of the gain, and larger ones
 * live long enough to leave V8's young generation and raise peak memory (docs/performance.md).
 */
const CHUNK = 128 << 10;

/** Protobuf wire types (the only other kinds, groups, etcd never sends). */
const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

/** The longest field head: a tag and a length, varints of at most 5 and 10 bytes. */
const HEAD_MAX = 15;

/**
 * The response body in, the bytes of its messages' `blob` fields out, in full chunks of CHUNK bytes. Each
 * message is `SnapshotResponse {1 header, 2 remaining_bytes, 3 blob}` in a gRPC frame; etcd sends 32 KiB
 * messages in HTTP/2 frames of 16 KiB. The body is parsed as it arrives, so each db byte is copied once,
 * straight into its chunk, rather than into its message, then its chunk: reading a 276 MB snapshot took
 * 0.42 s of CPU time against 0.55 s when each message was assembled first, then joined to the next.
 */
class SnapshotBlobs extends Transform {
  private out = Buffer.allocUnsafe(CHUNK);
  private used = 0;
  /** Bytes of the current message not yet read; 0 between messages. */
  private messageLeft = 0;
  /** A gRPC frame prefix or a field head, as far as it has arrived. */
  private readonly head = Buffer.alloc(HEAD_MAX);
  private headLength = 0;
  /** Bytes of the current field's value not yet read, and whether they are blob bytes to hand on. */
  private valueLeft = 0;
  private valueIsBlob = false;

  constructor(private readonly endpoint: string) {
    // A few chunks ahead of the next stage: more only holds memory (4 MiB raised peak RSS by ~20 MB).
    super({ readableHighWaterMark: 4 * CHUNK });
  }

  override _transform(body: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.parse(body);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    if (this.messageLeft > 0 || this.headLength > 0) {
      return done(new OperationError(`the snapshot stream from ${this.endpoint} ended mid-message`));
    }
    if (this.used > 0) this.push(this.out.subarray(0, this.used));
    done();
  }

  private parse(body: Buffer): void {
    let at = 0;
    while (at < body.length) {
      if (this.valueLeft > 0) {
        const n = Math.min(this.valueLeft, body.length - at);
        if (this.valueIsBlob) this.handOn(body, at, n);
        at += n;
        this.valueLeft -= n;
        this.messageLeft -= n;
      } else {
        this.head[this.headLength++] = body[at++];
        if (this.messageLeft === 0) this.readPrefix();
        else this.readFieldHead();
      }
    }
  }

  /** gRPC's 5-byte prefix: a compressed flag and the message length. */
  private readPrefix(): void {
    if (this.headLength < 5) return;
    if (this.head[0] !== 0) throw new OperationError(`etcd at ${this.endpoint} sent a compressed gRPC message`);
    this.messageLeft = this.head.readUInt32BE(1);
    this.headLength = 0;
  }

  /** A field's tag, and its length or value, once all their bytes are in. */
  private readFieldHead(): void {
    const tag = readSmallVarint(this.head, 0, this.headLength);
    const wire = tag ? tag.value & 7 : -1;
    let size: number | undefined; // of the value that follows the head
    if (!tag) size = undefined;
    else if (wire === BYTES) size = readSmallVarint(this.head, tag.next, this.headLength)?.value;
    else if (wire === VARINT) size = readSmallVarint(this.head, tag.next, this.headLength) ? 0 : undefined;
    else if (wire === FIXED64 || wire === FIXED32) size = wire === FIXED64 ? 8 : 4;
    else throw this.malformed(`unsupported protobuf wire type ${wire}`);
    if (size === undefined) {
      if (this.headLength === this.messageLeft || this.headLength === HEAD_MAX)
        throw this.malformed('a field is cut off');
      return;
    }
    this.messageLeft -= this.headLength;
    this.headLength = 0;
    if (size > this.messageLeft) throw this.malformed('a field runs past its message');
    this.valueLeft = size;
    this.valueIsBlob = wire === BYTES && tag!.value >>> 3 === 3;
  }

  private handOn(body: Buffer, at: number, length: number): void {
    while (length > 0) {
      const n = Math.min(length, CHUNK - this.used);
      body.copy(this.out, this.used, at, at + n);
      this.used += n;
      at += n;
      length -= n;
      if (this.used === CHUNK) {
        this.push(this.out);
        this.out = Buffer.allocUnsafe(CHUNK);
        this.used = 0;
      }
    }
  }

  private malformed(what: string): OperationError {
    return new OperationError(`etcd at ${this.endpoint} sent a malformed snapshot message: ${what}`);
  }
}
