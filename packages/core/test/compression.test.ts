import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { isDecompressionError } from '../src/backup/fetch-delta.js';
import { compressor, decompressor } from '../src/format/compression.js';

async function through(stream: NodeJS.ReadWriteStream, bytes: Buffer, chunk: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) chunks.push(bytes.subarray(i, i + chunk));
  const parts: Buffer[] = [];
  for await (const c of Readable.from(chunks).pipe(stream)) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** Several MB of half-compressible data, as an etcd db is: enough for zstd's workers to share the work. */
function etcdLikeData(size: number): Buffer {
  const parts: string[] = [];
  for (let n = 0, i = 0; n < size; i++) {
    const part = `{"kind":"ConfigMap","name":"cm-${i}","data":"${'x'.repeat(300)}"}${randomBytes(450).toString('base64')}`;
    parts.push(part);
    n += part.length;
  }
  return Buffer.from(parts.join('')).subarray(0, size);
}

/** The `zstd` command, as a user reads or writes our files without us. */
function zstdCommand(args: string[], input: Buffer): Buffer {
  return execFileSync('zstd', args, { input, maxBuffer: 1 << 30 });
}

describe('zstd compression', () => {
  const data = etcdLikeData(24 << 20);

  it("writes one zstd frame that the zstd command reads back exactly, on zstd's workers or not", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'zstd-test-'));
    try {
      for (const parallel of [true, false]) {
        const compressed = await through(compressor('zstd', { parallel }), data, 128 << 10);
        expect(compressed.length).toBeLessThan(data.length / 2);
        expect(zstdCommand(['-dc'], compressed).equals(data)).toBe(true);
        // one frame, so that any zstd decoder reads it whole (Node's own stops after the first frame)
        await writeFile(join(dir, 'snapshot.zst'), compressed);
        expect(execFileSync('zstd', ['-lv', join(dir, 'snapshot.zst')]).toString()).toMatch(/# Zstandard Frames: 1\n/);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads back what it wrote, whatever the chunking, and empty input too', async () => {
    for (const [chunk, parallel] of [
      [1 << 20, true],
      [65_537, false],
      [4096, true],
    ] as const) {
      const compressed = await through(compressor('zstd', { parallel }), data.subarray(0, 6 << 20), chunk);
      expect((await through(decompressor('.zst'), compressed, 7919)).equals(data.subarray(0, 6 << 20))).toBe(true);
    }
    const empty = await through(compressor('zstd'), Buffer.alloc(0), 1);
    expect(await through(decompressor('.zst'), empty, 1)).toEqual(Buffer.alloc(0));
  });

  it('reads files the zstd command wrote, several frames included', async () => {
    const a = data.subarray(0, 3 << 20);
    const b = data.subarray(3 << 20, 5 << 20);
    const twoFrames = Buffer.concat([zstdCommand(['-c', '-3'], a), zstdCommand(['-c', '-19'], b)]);
    expect((await through(decompressor('.zst'), twoFrames, 100_000)).equals(Buffer.concat([a, b]))).toBe(true);

    // Frame boundaries anywhere in a read, and an empty frame last: whole; cut inside the last header: truncated.
    const small = data.subarray(0, 5000);
    const endsEmpty = Buffer.concat([zstdCommand(['-c'], small), zstdCommand(['-c'], Buffer.alloc(0))]);
    for (const chunk of [1, 3, 7])
      expect((await through(decompressor('.zst'), endsEmpty, chunk)).equals(small)).toBe(true);
    const cut = endsEmpty.subarray(0, endsEmpty.length - 5);
    const err = await through(decompressor('.zst'), cut, 3).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/truncated/);
  });

  it('decodes no further ahead than its reader: a small input that expands a thousandfold waits in zstd', async () => {
    const zeros = zstdCommand(['-c'], Buffer.alloc(64 << 20));
    expect(zeros.length).toBeLessThan(64 << 10);
    const stream = decompressor('.zst');
    stream.end(zeros);
    await new Promise((r) => setTimeout(r, 50));
    expect(stream.readableLength).toBeLessThanOrEqual(256 << 10);
    let total = 0;
    let most = 0;
    for await (const c of stream) {
      total += (c as Buffer).length;
      most = Math.max(most, stream.readableLength);
      await new Promise((r) => setImmediate(r));
    }
    expect(total).toBe(64 << 20);
    expect(most).toBeLessThanOrEqual(256 << 10);
  });

  it('fails with a decompression error on damaged or truncated data', async () => {
    const compressed = await through(compressor('zstd'), data.subarray(0, 2 << 20), 128 << 10);
    const truncated = compressed.subarray(0, compressed.length - 1000);
    const damaged = Buffer.from(compressed);
    damaged.fill(0xa5, 5000, 9000);
    for (const bad of [truncated, damaged, Buffer.from('not zstd at all')]) {
      const err = await through(decompressor('.zst'), bad, 65_536).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(isDecompressionError(err)).toBe(true);
    }
    const err = await through(decompressor('.zst'), truncated, 65_536).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/truncated/);
  });
});
