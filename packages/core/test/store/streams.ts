import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';

/** Test bodies and what to check them with. */
export function randomData(size: number): Buffer {
  return randomBytes(size);
}

/** A body in chunks of at most 64 KiB, as a socket or a file would deliver it. */
export function bodyOf(data: Buffer, chunk = 64 * 1024): Readable {
  return Readable.from(chunksOf(data, chunk));
}

function* chunksOf(data: Buffer, chunk = 64 * 1024): Generator<Buffer> {
  for (let at = 0; at < data.length; at += chunk) yield data.subarray(at, at + chunk);
}

/** `size` bytes of a repeatable pattern, made as they are read: large bodies without large buffers. */
export function generatedBody(size: number, chunk = 1024 * 1024): Readable {
  const block = Buffer.alloc(chunk);
  for (let i = 0; i < chunk; i += 4) block.writeUInt32LE((i * 2654435761) >>> 0, i);
  return Readable.from(
    (function* () {
      for (let at = 0, n = 0; at < size; at += chunk, n++) {
        const part = Buffer.from(block.subarray(0, Math.min(chunk, size - at)));
        if (part.length >= 4) part.writeUInt32LE(n, 0); // no two chunks alike, so that misplaced parts show
        yield part;
      }
    })(),
  );
}

/** Like generatedBody, at most `bytesPerSecond`: an upload slow enough to be caught midway. */
export function pacedBody(size: number, bytesPerSecond: number, chunk = 1024 * 1024): Readable {
  const source = generatedBody(size, chunk);
  return Readable.from(
    (async function* () {
      for await (const part of source) {
        yield part as Buffer;
        await new Promise((resolve) => setTimeout(resolve, (1000 * (part as Buffer).length) / bytesPerSecond));
      }
    })(),
  );
}

/** Gives `first` bytes, then nothing more, ever: a source that hangs (until the put is aborted). */
export function stallingBody(data: Buffer, first: number): Readable {
  const chunks = [...chunksOf(data.subarray(0, first))];
  return new Readable({
    read() {
      const chunk = chunks.shift();
      if (chunk) this.push(chunk);
    },
  });
}

/** Gives `first` bytes, then fails, as a broken source (an etcd snapshot stream cut off) would. */
export function failingBody(data: Buffer, first: number): Readable {
  return Readable.from(
    (async function* () {
      yield* chunksOf(data.subarray(0, first));
      throw new Error('source failed');
    })(),
  );
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function sha256Of(stream: Readable): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { sha256: hash.digest('hex'), size };
}
