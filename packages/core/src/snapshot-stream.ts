import { Transform } from 'node:stream';
import { OperationError } from './errors.js';
import type { EtcdConnection } from './etcd-client.js';
import { grpcCall } from './etcd-grpc.js';
import { readFields } from './protobuf-wire.js';

/**
 * etcd's Maintenance/Snapshot stream as raw bytes (the bbolt db and etcd's sha256 trailer), read over
 * plain HTTP/2 (etcd-grpc.ts): `SnapshotResponse {1 header, 2 remaining_bytes, 3 blob}` a message.
 */
export function openSnapshotStream(
  conn: EtcdConnection,
  options: { signal?: AbortSignal; token?: string; endpoint?: string } = {},
): Transform {
  const call = grpcCall(conn, '/etcdserverpb.Maintenance/Snapshot', Buffer.alloc(0), options);
  const blobs = new Transform({
    writableObjectMode: true,
    readableHighWaterMark: 4 << 20,
    transform(message: Buffer, _enc, done) {
      try {
        const blob = readFields(message).find((f) => f.field === 3)?.bytes;
        done(null, blob && blob.length > 0 ? blob : undefined);
      } catch (err) {
        done(
          new OperationError(
            `etcd at ${options.endpoint ?? conn.endpoints[0]} sent a malformed snapshot message: ${(err as Error).message}`,
          ),
        );
      }
    },
  });
  call.messages.on('error', (err) => blobs.destroy(err));
  blobs.on('close', () => call.close());
  return call.messages.pipe(blobs);
}
