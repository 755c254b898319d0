/**
 * The children of a branch level, in key order: each page's id and the smallest key it may hold, packed into
 * three growing arrays. A replay refers to every leaf of the `key` bucket — ~90,000 pages for a 350 MB db —
 * and one small Buffer and one object per page cost ~250 bytes of heap each (~20 MB); packed they cost the
 * key bytes and 12 bytes.
 */
export class PageRefList {
  private keys = Buffer.alloc(4096);
  private ends = new Uint32Array(256);
  private pgids = new Float64Array(256);
  length = 0;

  /** Records a copy of `key`: the caller's buffer (a page being read or written) may be reused. */
  push(key: Buffer, pgid: number): void {
    const start = this.length === 0 ? 0 : this.ends[this.length - 1];
    if (start + key.length > this.keys.length) {
      const keys = Buffer.alloc(Math.max(2 * this.keys.length, start + key.length));
      this.keys.copy(keys, 0, 0, start);
      this.keys = keys;
    }
    if (this.length === this.ends.length) {
      const ends = new Uint32Array(2 * this.ends.length);
      ends.set(this.ends);
      this.ends = ends;
      const pgids = new Float64Array(2 * this.pgids.length);
      pgids.set(this.pgids);
      this.pgids = pgids;
    }
    key.copy(this.keys, start);
    this.ends[this.length] = start + key.length;
    this.pgids[this.length] = pgid;
    this.length++;
  }

  /** A view of the i-th key: valid until the next push. */
  key(i: number): Buffer {
    return this.keys.subarray(i === 0 ? 0 : this.ends[i - 1], this.ends[i]);
  }

  pgid(i: number): number {
    return this.pgids[i];
  }
}
