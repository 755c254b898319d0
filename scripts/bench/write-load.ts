// A steady write load on etcd: single puts at a rate, over one HTTP/2 connection (raw gRPC: a light client, so
// that the writer is not what limits the rate). The sidecar benchmark and the suite's dataset (run.ts) use it.
import { createHash } from 'node:crypto';
import http2 from 'node:http2';
import { setTimeout as sleep } from 'node:timers/promises';

export interface WriteLoadOptions {
  /** Puts a second. */
  perSecond: number;
  /** For how long; or, with `count`, until that many puts are sent. */
  seconds?: number;
  count?: number;
  /** Over how many keys, in turn (`/bench/000000` …). */
  keys?: number;
  valueSize: number;
  /** Each value starts with its write time in ms (for the delta lag); without it, a value depends on its index alone. */
  stamp?: boolean;
}

/** 1 MiB of base64 text that is the same on every run: the values' unique part is cut from it. */
export function valuePool(): string {
  const blocks: Buffer[] = [];
  for (let i = 0; i < (3 << 18) / 32; i++) blocks.push(createHash('sha256').update(`pool-${i}`).digest());
  return Buffer.concat(blocks).toString('base64');
}

/** The value of put `i`, `size` bytes: as Kubernetes objects look, half repetitive structure, half unique. */
export function loadValue(pool: string, i: number, size: number, stamp = ''): Buffer {
  const body = `{"kind":"ConfigMap","metadata":{"name":"cm-${i}","namespace":"ns-${i % 100}"},"data":"`;
  const at = (i * 7919) % (pool.length - size);
  return Buffer.from((stamp + body + pool.slice(at, at + size)).slice(0, size));
}

/** Runs the load; resolves once every put has been answered. */
export async function writeLoad(
  endpoint: string,
  options: WriteLoadOptions,
): Promise<{ writes: number; errors: number; seconds: number }> {
  const { perSecond, valueSize: size } = options;
  const keys = options.keys ?? 100_000;
  const ms = options.seconds === undefined ? Number.POSITIVE_INFINITY : options.seconds * 1000;
  const count = options.count ?? Number.POSITIVE_INFINITY;
  const session = http2.connect(endpoint);
  const pool = valuePool();
  const maxInFlight = 512;
  let inFlight = 0;
  let writes = 0;
  let errors = 0;
  let sent = 0;
  const started = Date.now();
  const put = (i: number) => {
    const key = Buffer.from(`/bench/${String(i % keys).padStart(6, '0')}`);
    const value = loadValue(pool, i, size, options.stamp ? `${Date.now()}|` : '');
    const message = Buffer.concat([field(1, key), field(2, value)]);
    const frame = Buffer.alloc(5);
    frame.writeUInt32BE(message.length, 1);
    inFlight++;
    const req = session.request({
      ':method': 'POST',
      ':path': '/etcdserverpb.KV/Put',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status: string | undefined;
    req.on('trailers', (t) => (status = String(t['grpc-status'])));
    req.on('response', (h) => (status ??= h['grpc-status'] === undefined ? undefined : String(h['grpc-status'])));
    req.on('data', () => {});
    req.on('close', () => {
      inFlight--;
      if (status === '0') writes++;
      else errors++;
    });
    req.on('error', () => {});
    req.end(Buffer.concat([frame, message]));
  };
  while (Date.now() - started < ms && sent < count) {
    const due = Math.min(count, Math.floor(((Date.now() - started) / 1000) * perSecond));
    while (sent < due && inFlight < maxInFlight) put(sent++);
    await sleep(2);
  }
  while (inFlight > 0) await sleep(5);
  session.close();
  return { writes, errors, seconds: (Date.now() - started) / 1000 };
}

function field(n: number, bytes: Buffer): Buffer {
  const varint = (v: number) => {
    const out: number[] = [];
    while (v >= 0x80) {
      out.push((v & 0x7f) | 0x80);
      v >>>= 7;
    }
    out.push(v);
    return Buffer.from(out);
  };
  return Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
}
