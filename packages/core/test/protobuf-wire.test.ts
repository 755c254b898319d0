import { describe, expect, it } from 'vitest';
import { readFields, writeMessage } from '../src/common/protobuf-wire.js';

describe('writeMessage', () => {
  it('writes a KeyValue byte for byte as etcd stores it: fields in order, zeros left out, int64 as uint64', () => {
    const kv = writeMessage([
      [1, Buffer.from('a')],
      [2, 2],
      [3, 300],
      [4, 0],
      [5, Buffer.alloc(0)],
      [6, -1n],
    ]);
    expect(kv.toString('hex')).toBe(`0a0161100218ac02${'30'}${'ff'.repeat(9)}01`);
  });

  it('writes what the reader reads back: large values, embedded messages', () => {
    const inner = writeMessage([[3, 2 ** 53 - 1]]);
    const fields = readFields(
      writeMessage([
        [1, inner],
        [2, 2n ** 64n - 1n],
        [3, 1],
      ]),
    );
    expect(fields.map((f) => f.field)).toEqual([1, 2, 3]);
    expect(readFields(fields[0].bytes!)).toEqual([{ field: 3, varint: BigInt(2 ** 53 - 1) }]);
    expect(fields[1].varint).toBe(2n ** 64n - 1n);
    expect(fields[2].varint).toBe(1n);
  });
});
