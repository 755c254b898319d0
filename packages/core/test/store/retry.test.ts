import { Readable } from 'node:stream';
import { isTransient, ObjectNotFoundError, RetryingStore, type SnapStore, type StoredObject } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { readAll } from './streams.js';

describe('isTransient', () => {
  it.each([
    [{ $metadata: { httpStatusCode: 503 }, name: 'SlowDown' }, true],
    [{ $metadata: { httpStatusCode: 500 } }, true],
    [{ statusCode: 429 }, true],
    [{ code: 503 }, true],
    [{ code: 'ECONNRESET' }, true],
    [{ name: 'TimeoutError' }, true],
    [new Error('socket hang up'), true],
    [new Error('wrapped', { cause: { code: 'EPIPE' } }), true],
    [{ $metadata: { httpStatusCode: 404 }, name: 'NoSuchKey' }, false],
    [{ statusCode: 403 }, false],
    [{ code: 'ECONNREFUSED' }, false],
    [{ code: 'ENOTFOUND' }, false],
    [new Error('checksum mismatch'), false],
  ])('%j → %s', (err, transient) => {
    expect(isTransient(err)).toBe(transient);
  });
});

/** A store whose downloads break off after `breakAfter` bytes, `breaks` times. */
function flakyStore(data: Buffer, breakAfter: number, breaks: number): SnapStore & { opens: number[] } {
  const opens: number[] = [];
  let left = breaks;
  const object: StoredObject = { name: 'o', size: data.length, lastModified: new Date(), metadata: {} };
  return {
    location: 'mem://',
    opens,
    async put() {},
    async get(name, options = {}) {
      if (name !== 'o') throw new ObjectNotFoundError('mem://', name);
      const offset = options.offset ?? 0;
      opens.push(offset);
      const broken = left-- > 0;
      return Readable.from(
        (async function* () {
          const end = broken ? Math.min(data.length, offset + breakAfter) : data.length;
          for (let at = offset; at < end; at += 1000) yield data.subarray(at, Math.min(end, at + 1000));
          if (broken) throw Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
        })(),
      );
    },
    async list() {
      return [object];
    },
    async stat(name) {
      return name === 'o' ? object : undefined;
    },
    async delete() {},
  };
}

describe('RetryingStore', () => {
  const policy = { attempts: 4, baseDelayMs: 1, maxDelayMs: 5 };

  it('resumes a download that breaks off, where it stopped', async () => {
    const data = Buffer.from(Array.from({ length: 10_000 }, (_, i) => i % 251));
    const inner = flakyStore(data, 3000, 3);
    const back = await readAll(await new RetryingStore(inner, policy).get('o'));
    expect(back.equals(data)).toBe(true);
    expect(inner.opens).toEqual([0, 3000, 6000, 9000]);
  });

  it('gives up after the policy`s attempts without progress', async () => {
    const inner = flakyStore(Buffer.alloc(10_000), 0, 10);
    await expect(readAll(await new RetryingStore(inner, policy).get('o'))).rejects.toThrow('aborted');
  });

  it('reports a missing object before streaming', async () => {
    await expect(new RetryingStore(flakyStore(Buffer.alloc(1), 0, 0), policy).get('x')).rejects.toBeInstanceOf(
      ObjectNotFoundError,
    );
  });
});
