import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crc32c } from '../src/wal/crc32c.js';
import { scanWal } from '../src/wal/wal-scan.js';

/**
 * WAL segments laid out as etcd writes them after a cut (docs/etcd-formats.md §5): cases that a small data dir
 * from a real etcd does not reach (a new 64 MB segment), so written here frame by frame.
 */
describe('scanWal', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'wal-scan-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const varint = (value: number) => {
    const out: number[] = [];
    for (let v = value; ; v = Math.floor(v / 128)) {
      if (v < 128) {
        out.push(v);
        return out;
      }
      out.push((v % 128) | 0x80);
    }
  };
  const message = (fields: Array<[number, number]>) =>
    Buffer.from(fields.flatMap(([field, value]) => [...varint(field << 3), ...varint(value)]));

  /** A segment of records, each `[type, data]`, chained from `seed` as etcd's encoder does (docs/etcd-formats.md §5.2–5.4). */
  function segment(seed: number, records: Array<[number, Buffer]>): Buffer {
    let crc = seed;
    const frames = records.map(([type, data]) => {
      crc = type === 4 ? seed : crc32c(crc, data);
      const record = Buffer.concat([
        message([
          [1, type],
          [2, crc],
        ]),
        ...(type === 4 ? [] : [Buffer.from([0x1a, ...varint(data.length)]), data]),
      ]);
      const pad = (8 - (record.length % 8)) % 8;
      const word = Buffer.alloc(8);
      word.writeBigUInt64LE(BigInt(record.length) | (pad ? BigInt(0x80 | pad) << 56n : 0n));
      return Buffer.concat([word, record, Buffer.alloc(pad)]);
    });
    return Buffer.concat([...frames, Buffer.alloc(4096)]); // preallocated zeros after the records
  }

  const entry = (index: number) =>
    message([
      [1, 0],
      [2, 2],
      [3, index],
    ]);
  /** What a new segment starts with: crc, metadata, the HardState. */
  const head: Array<[number, Buffer]> = [
    [4, Buffer.alloc(0)],
    [
      1,
      message([
        [1, 7],
        [2, 9],
      ]),
    ],
    [
      3,
      message([
        [1, 2],
        [3, 14],
      ]),
    ],
  ];

  it('reads a newest segment whose snapshot record is behind its first entry (etcd saves entries past the index it snapshots at)', async () => {
    const wal = join(dir, 'behind');
    await mkdir(wal);
    await writeFile(
      join(wal, '0000000000000001-000000000000000f.wal'),
      segment(0x1234abcd, [
        ...head,
        [
          5,
          message([
            [1, 10],
            [2, 2],
          ]),
        ],
        [2, entry(15)],
        [2, entry(16)],
      ]),
    );
    const summary = await scanWal(wal);
    expect(summary.lastSnapshot).toEqual({ index: 10, term: 2 });
    expect(summary.lastEntryIndex).toBe(16);
    expect(summary.tornTail).toBeUndefined();
  });

  it('refuses entries with a gap between them', async () => {
    const wal = join(dir, 'gap');
    await mkdir(wal);
    await writeFile(
      join(wal, '0000000000000001-000000000000000f.wal'),
      segment(0x1234abcd, [...head, [2, entry(15)], [2, entry(17)]]),
    );
    await expect(scanWal(wal)).rejects.toThrow(/entry 17 follows 15 \(entries are missing\)/);
  });
});
