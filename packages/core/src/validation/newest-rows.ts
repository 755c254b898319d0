import { closeSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { collectGarbage } from '../common/memory-bound.js';

/** Where a row lies in the db: its leaf page (undefined: the inline bucket) and its element there. */
export interface RowPlace {
  page: number | undefined;
  element: number;
}

/** A key's newest row, and whether the key was live at the earlier revision asked about. */
export interface NewestRow extends RowPlace {
  tombstone: boolean;
  liveAtEarlier: boolean;
}

/** Per key: its newest row so far, and its state at the earlier revision (none: no row at or below it yet). */
interface Entry {
  page: number;
  element: number;
  tombstone: boolean;
  earlier: Earlier;
}

/** A key's state at the earlier revision. */
const Earlier = { None: 0, Live: 1, Gone: 2 } as const;
type Earlier = (typeof Earlier)[keyof typeof Earlier];

/** What a Map entry of a short key costs, beyond its bytes (V8's string, entry and object), roughly. */
const ENTRY_OVERHEAD = 120;
const INLINE = -1;
const IO_CHUNK = 1 << 20;

/**
 * The newest row of every key of etcd's `key` bucket, as etcd's index would know it, from rows fed in revision
 * order (the bucket's own order), given back in key order. Memory is bounded, not by the number of keys: past
 * `memoryBudget` the keys seen so far go to a sorted run file in `tmpDir`, and the runs are merged at the end,
 * the newer run deciding a key they share (runs follow each other in revision order).
 */
export class NewestRows {
  private current = new Map<string, Entry>();
  private currentBytes = 0;
  private readonly runs: string[] = [];

  constructor(private readonly options: { tmpDir: string; memoryBudget: number }) {}

  /** A row, in revision order; `atOrBelowEarlier` when its revision is not past the earlier revision. */
  add(key: Buffer, place: RowPlace, tombstone: boolean, atOrBelowEarlier: boolean): void {
    const name = key.toString('latin1');
    let entry = this.current.get(name);
    if (!entry) {
      entry = { page: 0, element: 0, tombstone, earlier: Earlier.None };
      this.current.set(name, entry);
      this.currentBytes += name.length + ENTRY_OVERHEAD;
    }
    entry.page = place.page ?? INLINE;
    entry.element = place.element;
    entry.tombstone = tombstone;
    if (atOrBelowEarlier) entry.earlier = tombstone ? Earlier.Gone : Earlier.Live;
    if (this.currentBytes > this.options.memoryBudget) this.spill();
  }

  /** Every key once, in key order (bytewise, as etcd orders keys), with its newest row. */
  *inKeyOrder(): Generator<NewestRow> {
    if (this.runs.length === 0) {
      for (const name of [...this.current.keys()].sort()) yield toRow(this.current.get(name) as Entry);
      return;
    }
    if (this.current.size > 0) this.spill();
    const readers = this.runs.map((path) => new RunReader(path));
    try {
      for (;;) {
        let least: string | undefined;
        for (const r of readers) if (r.head && (least === undefined || r.head.name < least)) least = r.head.name;
        if (least === undefined) return;
        let merged: Entry | undefined;
        for (const r of readers) {
          const head = r.head;
          if (head?.name !== least) continue;
          const earlier = head.entry.earlier === Earlier.None ? (merged?.earlier ?? Earlier.None) : head.entry.earlier;
          merged = { ...head.entry, earlier };
          r.advance();
        }
        yield toRow(merged as Entry);
      }
    } finally {
      for (const r of readers) r.close();
    }
  }

  /** Removes the run files. */
  close(): void {
    for (const path of this.runs) rmSync(path, { force: true });
    this.runs.length = 0;
  }

  /** The keys seen since the last run, sorted, to a run file: `u32 key length, key, f64 page, u32 element, u8 flags`. */
  private spill(): void {
    const path = join(this.options.tmpDir, `newest-rows-${process.pid}-${this.runs.length}.run`);
    this.runs.push(path);
    const fd = openSync(path, 'wx', 0o600);
    try {
      let buf = Buffer.allocUnsafe(IO_CHUNK);
      let at = 0;
      for (const name of [...this.current.keys()].sort()) {
        const entry = this.current.get(name) as Entry;
        const size = 4 + name.length + 13;
        if (at + size > buf.length) {
          writeSync(fd, buf, 0, at);
          at = 0;
          if (size > buf.length) buf = Buffer.allocUnsafe(size);
        }
        at = buf.writeUInt32LE(name.length, at);
        at += buf.write(name, at, 'latin1');
        at = buf.writeDoubleLE(entry.page, at);
        at = buf.writeUInt32LE(entry.element, at);
        at = buf.writeUInt8((entry.tombstone ? 1 : 0) | (entry.earlier << 1), at);
      }
      writeSync(fd, buf, 0, at);
    } finally {
      closeSync(fd);
    }
    this.current = new Map();
    this.currentBytes = 0;
    // The old map is garbage in the old generation, which V8 would otherwise let grow by several maps first.
    collectGarbage('major');
  }
}

function toRow(entry: Entry): NewestRow {
  return {
    page: entry.page === INLINE ? undefined : entry.page,
    element: entry.element,
    tombstone: entry.tombstone,
    liveAtEarlier: entry.earlier === Earlier.Live,
  };
}

/** A run file read front to back, a chunk at a time. */
class RunReader {
  head?: { name: string; entry: Entry };
  private readonly fd: number;
  private buf = Buffer.alloc(0);
  private at = 0;
  private position = 0;
  private ended = false;

  constructor(path: string) {
    this.fd = openSync(path, 'r');
    this.advance();
  }

  advance(): void {
    const keyLength = this.ensure(4) ? this.buf.readUInt32LE(this.at) : undefined;
    if (keyLength === undefined || !this.ensure(4 + keyLength + 13)) {
      this.head = undefined;
      return;
    }
    let at = this.at + 4;
    const name = this.buf.toString('latin1', at, at + keyLength);
    at += keyLength;
    const flags = this.buf[at + 12];
    this.head = {
      name,
      entry: {
        page: this.buf.readDoubleLE(at),
        element: this.buf.readUInt32LE(at + 8),
        tombstone: (flags & 1) === 1,
        earlier: (flags >> 1) as Earlier,
      },
    };
    this.at = at + 13;
  }

  close(): void {
    closeSync(this.fd);
  }

  /** At least n unread bytes in the buffer, or false at the end of the file. */
  private ensure(n: number): boolean {
    while (this.buf.length - this.at < n) {
      if (this.ended) return false;
      const rest = this.buf.subarray(this.at);
      const next = Buffer.allocUnsafe(Math.max(IO_CHUNK, n));
      rest.copy(next);
      const read = readSync(this.fd, next, rest.length, next.length - rest.length, this.position);
      this.position += read;
      if (read === 0) this.ended = true;
      this.buf = next.subarray(0, rest.length + read);
      this.at = 0;
    }
    return true;
  }
}
