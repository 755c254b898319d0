import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { goLzwCompress } from '@etcd-steward/testing';
import { describe, expect, it } from 'vitest';
import { IntegrityError } from '../src/common/errors.js';
import { decompressor } from '../src/format/compression.js';
import { LzwDecoder } from '../src/format/lzw-decoder.js';

async function decode(bytes: Buffer, chunk = bytes.length || 1): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) chunks.push(bytes.subarray(i, i + chunk));
  const parts: Buffer[] = [];
  for await (const c of Readable.from(chunks).pipe(new LzwDecoder('test'))) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** Text with long repeats (many codes that refer to the code being defined) and a few random runs. */
function etcdLikeJson(size: number): Buffer {
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const s = `{"etcdEvent":{"kv":{"key":"L3JlZ2lzdHJ5L3BvZHMv${n}","create_revision":${n},"mod_revision":${n + 7},"version":1,"value":"${randomBytes(n % 40).toString('base64')}"}},"time":"2026-11-21T22:15:58.8${n}Z"},`;
    parts.push(s);
    n += s.length;
  }
  return Buffer.from(parts.join(''));
}

describe('lzw decoder (Go compress/lzw, LSB, 8-bit literals)', () => {
  const cases: Array<[string, Buffer]> = [
    ['empty', Buffer.alloc(0)],
    ['one byte', Buffer.from('x')],
    ['a run of one byte (code == hi case)', Buffer.alloc(10_000, 0x61)],
    ['etcd-like JSON past several table resets', etcdLikeJson(600_000)],
    ['random bytes (table fills at 12 bits)', randomBytes(50_000)],
  ];
  for (const [name, input] of cases) {
    it(`round-trips ${name}`, async () => {
      const compressed = goLzwCompress(input);
      // Chunk edges fall anywhere inside a code.
      for (const chunk of [compressed.length, 4093, input.length < 20_000 ? 1 : 997]) {
        expect((await decode(compressed, chunk)).equals(input)).toBe(true);
      }
    });
  }

  it('is what decompressor(".Z") returns', async () => {
    const input = etcdLikeJson(20_000);
    const parts: Buffer[] = [];
    for await (const c of Readable.from([goLzwCompress(input)]).pipe(decompressor('.Z'))) parts.push(c as Buffer);
    expect(Buffer.concat(parts).equals(input)).toBe(true);
  });

  it('fails on a truncated stream and on an undefined code', async () => {
    const compressed = goLzwCompress(etcdLikeJson(20_000));
    await expect(decode(compressed.subarray(0, compressed.length - 10))).rejects.toThrow(IntegrityError);
    await expect(decode(compressed.subarray(0, compressed.length - 10))).rejects.toThrow(/truncated/);
    // 9-bit code 300 as the very first code: nothing is defined yet
    await expect(decode(Buffer.from([300 & 0xff, 300 >> 8, 0, 0]))).rejects.toThrow(/not defined/);
  });

  it('ignores bytes after the end code', async () => {
    const input = Buffer.from('hello hello hello');
    expect((await decode(Buffer.concat([goLzwCompress(input), Buffer.from([1, 2, 3])]))).toString()).toBe(
      input.toString(),
    );
  });
});
