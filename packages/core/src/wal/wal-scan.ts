import { IntegrityError } from '../common/errors.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import { decodeWalSegment, WAL_RECORD_TYPE } from './wal-segment-decoder.js';
import { listWalSegments, segmentGap, type WalSegment } from './wal-segments.js';

export interface WalSnapshotMark {
  index: number;
  term: number;
}

/** raft's HardState without its vote (a member ID, a uint64 that a JSON number cannot hold). */
export interface HardState {
  term: number;
  commit: number;
}

/** What a WAL read found; any damage before the tail throws instead. */
export interface WalSummary {
  segments: number;
  /** Segments read: the last one only, or all. */
  segmentsRead: number;
  records: number;
  /** The newest snapshot record read. */
  lastSnapshot?: WalSnapshotMark;
  /** The newest HardState read. */
  hardState?: HardState;
  lastEntryIndex?: number;
  /** A torn last write at the end of the last segment: etcd truncates it at start-up (docs/etcd-formats.md §5.5). */
  tornTail?: { segment: string; offset: number; reason: string };
}

/**
 * Reads a WAL directory (docs/etcd-formats.md §5): segment names and order, every frame, the CRC chain across
 * segments, identical metadata, contiguous entry indexes, the newest snapshot record and HardState. `last`
 * reads only the newest segment (from the seed its crc record states): that is where a crash leaves its mark,
 * and its cost does not grow with the number of segments kept.
 */
export async function scanWal(dir: string, segmentsToRead: 'last' | 'all'): Promise<WalSummary> {
  const segments = await listWalSegments(dir);
  if (segments.length === 0) throw new IntegrityError(`${dir} holds no WAL segment (*.wal)`);
  const gap = segmentGap(segments);
  if (gap) throw new IntegrityError(gap);
  const read: WalSegment[] = segmentsToRead === 'all' ? segments : segments.slice(-1);
  const summary: WalSummary = { segments: segments.length, segmentsRead: read.length, records: 0 };
  let metadata: Buffer | undefined;
  let crc = 0;
  for (const [i, segment] of read.entries()) {
    const end = decodeWalSegment(segment.path, { crc, last: i === read.length - 1 }, (record) => {
      const where = () => `WAL segment ${segment.name} at byte ${record.offset}`;
      if (record.type === WAL_RECORD_TYPE.metadata) {
        if (!metadata) metadata = Buffer.from(record.data);
        else if (!metadata.equals(record.data)) throw new IntegrityError(`${where()}: metadata differs from earlier`);
      } else if (record.type === WAL_RECORD_TYPE.entry) {
        const index = fieldValue(record.data, 3);
        const last = summary.lastEntryIndex;
        // A lower or equal index overwrites the log's tail (a new leader's entries); a higher one must follow.
        // Not measured from a snapshot record: etcd saves entries past the index it snapshots at.
        if (last !== undefined && index > last + 1) {
          throw new IntegrityError(`${where()}: entry ${index} follows ${last} (entries are missing)`);
        }
        summary.lastEntryIndex = index;
      } else if (record.type === WAL_RECORD_TYPE.state) {
        summary.hardState = {
          term: fieldValue(record.data, 1),
          commit: fieldValue(record.data, 3),
        };
      } else if (record.type === WAL_RECORD_TYPE.snapshot) {
        summary.lastSnapshot = { index: fieldValue(record.data, 1), term: fieldValue(record.data, 2) };
      }
    });
    summary.records += end.records;
    crc = end.crc;
    if (end.torn) summary.tornTail = { segment: segment.name, ...end.torn };
  }
  return summary;
}

/** A varint field of a small protobuf message (raft's are proto2 and write every field), 0 when absent. */
function fieldValue(message: Buffer, field: number): number {
  for (const cursor = new ProtoCursor(message); cursor.next(); ) {
    if (cursor.field === field && cursor.wire === 0) return cursor.value;
  }
  return 0;
}
