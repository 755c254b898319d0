import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { IntegrityError } from '../common/errors.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import { crc32c } from './crc32c.js';

/** `walpb.Record` types (docs/etcd-formats.md §5.3). */
export const WAL_RECORD_TYPE = { metadata: 1, entry: 2, state: 3, crc: 4, snapshot: 5 } as const;

export interface WalRecord {
  type: number;
  /** The running CRC-32C after this record (for a crc record: the chain's seed it states). */
  crc: number;
  /** A view into the decoder's window: valid only while the visitor runs. */
  data: Buffer;
  /** Where the record's length word is in the segment. */
  offset: number;
}

/** How a segment's records ended: at a zero length word or the file's end, or at a torn last write. */
export interface SegmentEnd {
  crc: number;
  records: number;
  torn?: { offset: number; reason: string };
}

/** etcd 3.4 (and 3.5.0–3.5.4) refuses a record of 10 MiB or more at start-up (docs/etcd-formats.md §5.2). */
const MAX_RECORD = 10 * 1024 * 1024;
const SECTOR = 512;
const WINDOW = 4 << 20;
/** The window's buffer, kept from one segment to the next: a new one a segment is garbage outside V8's heap, which
 * it collects late (20 MB more at the peak over 6 segments). The decoder is synchronous, so one is enough. */
let windowBuffer: Buffer | undefined;

/**
 * Decodes one WAL segment's frames in order, checking the CRC chain from `crc` (0 accepts whatever seed the
 * segment's crc record states, as a fresh etcd decoder does). A bad record that has an all-zero 512-byte
 * sector is a torn write, which etcd repairs, and ends the segment when it is the last one; any other bad
 * record is damage and throws (docs/etcd-formats.md §5). Reads a window at a time, never the file.
 */
export function decodeWalSegment(
  path: string,
  options: { crc: number; last: boolean },
  visit: (record: WalRecord) => void,
): SegmentEnd {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    // One buffer, refilled: a new one a window would leave garbage the size of the segment to collect.
    windowBuffer ??= Buffer.allocUnsafe(WINDOW);
    let buffer = windowBuffer;
    let window = buffer.subarray(0, 0);
    let windowStart = 0;
    const bytes = (position: number, length: number): Buffer => {
      if (position < windowStart || position + length > windowStart + window.length) {
        if (length > buffer.length) buffer = Buffer.allocUnsafe(length); // one record larger than the window
        windowStart = position;
        window = buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, position));
      }
      return window.subarray(position - windowStart, position - windowStart + length);
    };
    let crc = options.crc;
    let records = 0;
    let offset = 0;
    const bad = (reason: string, frameLength: number): SegmentEnd => {
      const frame = bytes(offset + 8, Math.min(frameLength, size - offset - 8));
      if (options.last && (frame.length < frameLength || hasZeroSector(frame, offset + 8))) {
        return { crc, records, torn: { offset, reason } };
      }
      throw new IntegrityError(`WAL segment ${path} is damaged at byte ${offset}: ${reason}`);
    };
    while (offset + 8 <= size) {
      const word = bytes(offset, 8).readBigUInt64LE(0);
      if (word === 0n) break;
      const length = Number(word & 0x00ffffffffffffffn);
      const pad = word >> 63n === 1n ? Number((word >> 56n) & 7n) : 0;
      if (length >= MAX_RECORD - pad) return bad(`a record length of ${length} bytes`, 8);
      if (offset + 8 + length + pad > size) return bad('the last record runs past the end of the file', length + pad);
      const record = parseRecord(bytes(offset + 8, length));
      if (!record) return bad('a record that does not decode', length + pad);
      if (record.type === WAL_RECORD_TYPE.crc) {
        if (crc !== 0 && record.crc !== crc) return bad('the crc record breaks the CRC chain', length + pad);
        crc = record.crc;
      } else {
        crc = crc32c(crc, record.data);
        if (record.crc !== crc) return bad('a record fails its CRC', length + pad);
      }
      visit({ ...record, offset });
      records++;
      offset += 8 + length + pad;
    }
    return { crc, records };
  } finally {
    closeSync(fd);
  }
}

function parseRecord(bytes: Buffer): { type: number; crc: number; data: Buffer } | undefined {
  let type: number | undefined;
  let crc: number | undefined;
  let data: Buffer = Buffer.alloc(0);
  try {
    for (const cursor = new ProtoCursor(bytes); cursor.next(); ) {
      if (cursor.field === 1 && cursor.wire === 0) type = cursor.value;
      else if (cursor.field === 2 && cursor.wire === 0) crc = cursor.value;
      else if (cursor.field === 3 && cursor.wire === 2) data = cursor.bytes();
    }
  } catch {
    return undefined;
  }
  return type === undefined || crc === undefined || type < 1 || type > 5 ? undefined : { type, crc, data };
}

/** etcd's torn-write test: the frame split at the file's 512-byte sector boundaries has a chunk of zeros. */
function hasZeroSector(frame: Buffer, fileOffset: number): boolean {
  let start = 0;
  while (start < frame.length) {
    const end = Math.min(frame.length, start + SECTOR - ((fileOffset + start) % SECTOR));
    if (frame.subarray(start, end).every((b) => b === 0)) return true;
    start = end;
  }
  return false;
}
