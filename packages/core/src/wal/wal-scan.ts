import { IntegrityError } from '../common/errors.js';
import { ProtoCursor } from '../common/protobuf-wire.js';
import { type EntryRevisions, entryRevisions } from './entry-revisions.js';
import { decodeWalSegment, WAL_RECORD_TYPE } from './wal-segment-decoder.js';
import { listWalSegments, segmentGap } from './wal-segments.js';

export interface WalSnapshotMark {
  index: number;
  term: number;
}

/** raft's HardState without its vote (a member ID, a uint64 that a JSON number cannot hold). */
export interface HardState {
  term: number;
  commit: number;
}

/** The entries etcd applies at start-up past a db's consistent index, and the revisions they create. */
export interface WalReplay {
  /** Entries in the log past the consistent index (committed or not). */
  entries: number;
  /** Of them, committed (up to the HardState's commit): etcd applies these before it serves. */
  committed: number;
  /** Revisions the committed entries create for certain (docs/etcd-formats.md §6.1). */
  revisionsAtLeast: number;
  /** Revisions all of them may create: one an entry at most. */
  revisionsAtMost: number;
}

/** What a WAL read found; any damage before the tail throws instead. */
export interface WalSummary {
  segments: number;
  segmentsRead: number;
  records: number;
  /** The newest snapshot record read. */
  lastSnapshot?: WalSnapshotMark;
  /** Every snapshot record, in the order written. */
  snapshots: WalSnapshotMark[];
  /** The newest HardState read. */
  hardState?: HardState;
  lastEntryIndex?: number;
  /** A torn last write at the end of the last segment: etcd truncates it at start-up (docs/etcd-formats.md §5.5). */
  tornTail?: { segment: string; offset: number; reason: string };
  /** With `replayAfter`: what etcd replays past it. */
  replay?: WalReplay;
}

/**
 * Reads a WAL directory (docs/etcd-formats.md §5) as etcd does at start-up: every segment, because etcd 3.4.8+
 * and 3.5 look for snapshot records in all of them and stop at any record that fails its CRC (only the last
 * record of the last segment may be torn). Checks segment names and order, every frame, the CRC chain across
 * segments, identical metadata, contiguous entry indexes; finds the snapshot records and the HardState.
 * `replayAfter` (a db's consistent index) also classifies the entries after it, as etcd's log holds them (a
 * rewritten index drops the entries after it).
 */
export async function scanWal(dir: string, options: { replayAfter?: number } = {}): Promise<WalSummary> {
  const segments = await listWalSegments(dir);
  if (segments.length === 0) throw new IntegrityError(`${dir} holds no WAL segment (*.wal)`);
  const gap = segmentGap(segments);
  if (gap) throw new IntegrityError(gap);
  const summary: WalSummary = { segments: segments.length, segmentsRead: segments.length, records: 0, snapshots: [] };
  const { replayAfter } = options;
  const replay = new EntryLog();
  let metadata: Buffer | undefined;
  let crc = 0;
  for (const [i, segment] of segments.entries()) {
    const end = decodeWalSegment(segment.path, { crc, last: i === segments.length - 1 }, (record) => {
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
        if (replayAfter !== undefined) replay.put(index - replayAfter - 1, () => entryRevisions(record.data));
      } else if (record.type === WAL_RECORD_TYPE.state) {
        summary.hardState = {
          term: fieldValue(record.data, 1),
          commit: fieldValue(record.data, 3),
        };
      } else if (record.type === WAL_RECORD_TYPE.snapshot) {
        summary.lastSnapshot = { index: fieldValue(record.data, 1), term: fieldValue(record.data, 2) };
        summary.snapshots.push(summary.lastSnapshot);
      }
    });
    summary.records += end.records;
    crc = end.crc;
    if (end.torn) summary.tornTail = { segment: segment.name, ...end.torn };
  }
  if (replayAfter !== undefined) {
    summary.replay = replay.summary(Math.max(0, (summary.hardState?.commit ?? 0) - replayAfter));
  }
  return summary;
}

const CODE: Record<EntryRevisions, number> = { none: 0, one: 1, maybe: 2 };

/** What each entry past a position creates, by position; grows by doubling, one byte an entry. */
class EntryLog {
  private codes = new Uint8Array(1024);
  private length = 0;

  /** The entry at `position` (0 is the first after the consistent index); before it, etcd does not apply it. */
  put(position: number, revisions: () => EntryRevisions): void {
    if (position < 0) {
      this.length = 0; // an index at or below the consistent index rewrote the log's tail
      return;
    }
    if (position > this.length) return; // the log starts past the consistent index: a db etcd swaps for a .snap.db
    if (position === this.codes.length) {
      const grown = new Uint8Array(this.codes.length * 2);
      grown.set(this.codes);
      this.codes = grown;
    }
    this.codes[position] = CODE[revisions()];
    this.length = position + 1;
  }

  summary(committed: number): WalReplay {
    const upTo = Math.min(committed, this.length);
    let atLeast = 0;
    let atMost = 0;
    for (let i = 0; i < this.length; i++) {
      if (this.codes[i] === CODE.one && i < upTo) atLeast++;
      if (this.codes[i] !== CODE.none) atMost++;
    }
    return { entries: this.length, committed: upTo, revisionsAtLeast: atLeast, revisionsAtMost: atMost };
  }
}

/** A varint field of a small protobuf message (raft's are proto2 and write every field), 0 when absent. */
function fieldValue(message: Buffer, field: number): number {
  for (const cursor = new ProtoCursor(message); cursor.next(); ) {
    if (cursor.field === field && cursor.wire === 0) return cursor.value;
  }
  return 0;
}
