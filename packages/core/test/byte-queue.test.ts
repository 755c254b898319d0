import { ByteQueue } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

/** `bytes` pushed into a queue in pieces of the given sizes, in turn. */
function queueOf(bytes: Buffer, sizes: number[]): ByteQueue {
  const queue = new ByteQueue();
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const size = sizes[i % sizes.length];
    queue.push(bytes.subarray(at, at + size));
    at += size;
  }
  return queue;
}

const counting = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => i % 251));

describe('ByteQueue', () => {
  it('hands out exact counts across piece boundaries, in order, whatever the pieces', () => {
    const bytes = counting(1000);
    for (const sizes of [[1], [7], [3, 100, 1], [1000]]) {
      const queue = queueOf(bytes, sizes);
      const out: Buffer[] = [];
      for (const n of [5, 0, 13, 1, 200, 381]) out.push(Buffer.from(queue.take(n)));
      expect(queue.length).toBe(400);
      out.push(queue.take(queue.length));
      expect(Buffer.concat(out)).toEqual(bytes);
      expect(queue.length).toBe(0);
    }
  });

  it('peeks without taking, up to what it holds, and skips without reading', () => {
    const queue = queueOf(counting(30), [4, 4, 22]);
    expect(queue.peek(10)).toEqual(counting(10));
    expect(queue.peek(100)).toEqual(counting(30));
    expect(queue.length).toBe(30);
    queue.skip(6);
    expect(queue.peek(3)).toEqual(counting(9).subarray(6));
    expect(queue.take(24)).toEqual(counting(30).subarray(6));
  });

  it('keeps what it handed out apart from what it still holds', () => {
    const queue = queueOf(Buffer.alloc(8), [3, 5]);
    const spanning = queue.take(4);
    spanning.fill(0xff);
    expect(queue.take(4)).toEqual(Buffer.alloc(4));
  });

  it('hands out counts of many pieces, and keeps its order over a long run of takes', () => {
    const piece = 64 << 10;
    const bytes = counting(64 * piece + 3);
    const queue = queueOf(bytes, [piece]);
    expect(queue.take(10 * piece + 1)).toEqual(bytes.subarray(0, 10 * piece + 1));
    for (let i = 0; i < 50; i++) {
      const at = (10 + i) * piece + 1;
      expect(queue.take(piece)).toEqual(bytes.subarray(at, at + piece));
    }
    expect(queue.take(queue.length)).toEqual(bytes.subarray(60 * piece + 1));
  });

  it('is empty to begin with, ignores empty pieces and refuses to hand out more than it holds', () => {
    const queue = new ByteQueue();
    queue.push(Buffer.alloc(0));
    expect(queue.length).toBe(0);
    expect(queue.peek(8)).toEqual(Buffer.alloc(0));
    expect(queue.take(0)).toEqual(Buffer.alloc(0));
    expect(() => queue.take(1)).toThrow(RangeError);
    queue.push(Buffer.from('ab'));
    expect(() => queue.skip(3)).toThrow('3 bytes asked of a queue that holds 2');
    expect(queue.take(2).toString()).toBe('ab');
  });
});
