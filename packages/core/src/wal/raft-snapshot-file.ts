import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { IntegrityError } from '../common/errors.js';
import { readSmallVarint } from '../common/protobuf-wire.js';
import { crc32c } from './crc32c.js';
import type { WalSnapshotMark } from './wal-scan.js';

/** A raft snapshot file read and found sound: its name, and the index and term its metadata states. */
export interface RaftSnapshotFile extends WalSnapshotMark {
  name: string;
  /** Its metadata says another index or term than its name: etcd goes by the metadata. */
  misnamed: boolean;
}

const NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.snap$/;
const CHUNK = 1 << 20;
/** A proto header: a tag and a length, each a varint of at most 10 bytes. */
const HEADER = 20;

/** The raft snapshot files in `member/snap`, `%016x-%016x.snap` (term, index), newest first, as etcd tries them. */
export async function raftSnapshotNames(snapDir: string): Promise<string[]> {
  return (await readdir(snapDir))
    .filter((n) => NAME.test(n))
    .sort()
    .reverse();
}

/**
 * A raft snapshot file (docs/etcd-formats.md §4.3) read as etcd reads it: a `snappb.Snapshot` whose crc (CRC-32C
 * of its data, never 0) matches, whose data is a `raftpb.Snapshot` with metadata. Damage throws an
 * IntegrityError naming the file (etcd renames such a file `.broken` and tries the one before). The data (the v2
 * store, of any size) is read a chunk at a time; only the metadata is held.
 */
export function readRaftSnapshot(snapDir: string, name: string): RaftSnapshotFile {
  const [, term, index] = NAME.exec(name) as RegExpExecArray;
  const fd = openSync(join(snapDir, name), 'r');
  const fault = (what: string) =>
    new IntegrityError(`member/snap/${name}: ${what}; etcd would set it aside as .broken`);
  try {
    const size = fstatSync(fd).size;
    const at = (position: number, length: number): Buffer => {
      const buf = Buffer.alloc(Math.max(0, Math.min(length, size - position)));
      readSync(fd, buf, 0, buf.length, position);
      return buf;
    };
    // snappb.Snapshot: crc = 1 (varint), data = 2 (bytes)
    let crc: number | undefined;
    let data: { start: number; length: number } | undefined;
    for (let position = 0; position < size; ) {
      const field = readField(at(position, HEADER), position, size);
      if (!field) throw fault('its framing is broken (a field runs past the end of the file)');
      if (field.number === 1 && field.wire === 0) crc = field.value;
      else if (field.number === 2 && field.wire === 2) data = { start: field.start, length: field.value };
      position = field.end;
    }
    if (!data || data.length === 0) throw fault('it holds no snapshot data');
    if (!crc) throw fault('its crc is 0');
    let actual = 0;
    for (let done = 0; done < data.length; done += CHUNK) {
      actual = crc32c(actual, at(data.start + done, Math.min(CHUNK, data.length - done)));
    }
    if (actual !== crc) throw fault(`its crc ${crc} does not match its data (${actual})`);
    // raftpb.Snapshot: metadata = 2 {index = 2, term = 3}
    let mark: WalSnapshotMark | undefined;
    for (let position = data.start; position < data.start + data.length; ) {
      const field = readField(at(position, HEADER), position, data.start + data.length);
      if (!field) throw fault('its raft snapshot is malformed');
      if (field.number === 2 && field.wire === 2) mark = snapshotMetadata(at(field.start, field.value));
      position = field.end;
    }
    if (!mark) throw fault('its raft snapshot has no metadata');
    const misnamed = mark.index !== Number.parseInt(index, 16) || mark.term !== Number.parseInt(term, 16);
    return { name, ...mark, misnamed };
  } finally {
    closeSync(fd);
  }
}

/** A field's header at `position` (given its first bytes): where its value starts and the field ends. */
function readField(head: Buffer, position: number, end: number) {
  const tag = readSmallVarint(head, 0, head.length);
  if (!tag) return undefined;
  const number = Math.floor(tag.value / 8);
  const wire = tag.value % 8;
  const value = readSmallVarint(head, tag.next, head.length);
  if (!value || (wire !== 0 && wire !== 2)) return undefined;
  const start = position + value.next;
  const fieldEnd = wire === 2 ? start + value.value : start;
  return fieldEnd > end ? undefined : { number, wire, value: value.value, start, end: fieldEnd };
}

/** raftpb.SnapshotMetadata's index (2) and term (3). */
function snapshotMetadata(bytes: Buffer): WalSnapshotMark {
  const mark = { index: 0, term: 0 };
  for (let at = 0; at < bytes.length; ) {
    const field = readField(bytes.subarray(at, at + HEADER), at, bytes.length);
    if (!field) break;
    if (field.number === 2 && field.wire === 0) mark.index = field.value;
    if (field.number === 3 && field.wire === 0) mark.term = field.value;
    at = field.end;
  }
  return mark;
}
