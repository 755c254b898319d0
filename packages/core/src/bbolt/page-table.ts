import { randomUUID } from 'node:crypto';
import { closeSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PageTableOptions {
  /** Where the table goes once it outgrows its window: a folder on local disk (the system temp dir if not set). */
  spillDir?: string;
  /** Pages held in memory (8,192 unless set: 72 KiB, a 32 MiB db at 4 KiB pages). */
  windowPages?: number;
}

/** A record: the page's kind (a byte) and one number. */
const RECORD = 9;

/**
 * One kind and one number per page of a db streaming past, set in page order and read in any order once it has
 * passed. So that memory does not grow with the db (9 bytes a page would be 18 MB for etcd's 8 GiB limit), only a
 * window of pages stays in memory; the pages before it go to a temp file, unlinked as soon as it is open, so
 * nothing is left behind whatever ends the process. A db that fits the window never touches the disk.
 */
export class PageTable {
  private readonly windowPages: number;
  private window: Buffer;
  /** The first page the window holds. */
  private base = 0;
  private fd?: number;

  constructor(
    readonly pageCount: number,
    private readonly options: PageTableOptions = {},
  ) {
    this.windowPages = Math.min(options.windowPages ?? 8192, Math.max(pageCount, 1));
    this.window = Buffer.alloc(this.windowPages * RECORD);
  }

  /** Pages are set in increasing order; a page never set reads as kind 0. */
  set(page: number, kind: number, value: number): void {
    if (page < this.base || page >= this.pageCount) throw new RangeError(`page ${page} set out of order`);
    while (page >= this.base + this.windowPages) this.slide();
    const at = (page - this.base) * RECORD;
    this.window[at] = kind;
    this.window.writeDoubleLE(value, at + 1);
  }

  /** What was set for `page`: one read of the file when it is behind the window. */
  get(page: number): { kind: number; value: number } {
    const record = this.record(page);
    return { kind: record[0], value: record.readDoubleLE(1) };
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private record(page: number): Buffer {
    if (page >= this.base) {
      const at = (page - this.base) * RECORD;
      return page < this.base + this.windowPages ? this.window.subarray(at, at + RECORD) : Buffer.alloc(RECORD);
    }
    const out = Buffer.alloc(RECORD);
    readSync(this.spill(), out, 0, RECORD, page * RECORD);
    return out;
  }

  /** Writes the window out and moves it on to the next pages. */
  private slide(): void {
    writeSync(this.spill(), this.window, 0, this.window.length, this.base * RECORD);
    this.window.fill(0);
    this.base += this.windowPages;
  }

  private spill(): number {
    if (this.fd === undefined) {
      const path = join(this.options.spillDir ?? tmpdir(), `.page-table-${randomUUID()}`);
      this.fd = openSync(path, 'wx+', 0o600);
      unlinkSync(path);
    }
    return this.fd;
  }
}
