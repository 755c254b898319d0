const EMPTY = Buffer.alloc(0);

/**
 * Bytes received in pieces (a stream's chunks) and handed out in counts of the reader's choosing: a gRPC frame, an
 * encrypted chunk, a bbolt page. A count that lies within the first piece is a view of it, with no copy; one that
 * spans pieces is a copy of exactly those bytes, never of all that is queued, so that what a reader keeps (a watch
 * event, a decrypted chunk) does not hold every piece queued behind it alive.
 */
export class ByteQueue {
  private pieces: Buffer[] = [];
  /** The first piece still queued: taking from the front does not move the others along the array. */
  private head = 0;
  private queued = 0;

  /** The bytes queued. */
  get length(): number {
    return this.queued;
  }

  push(piece: Buffer): void {
    if (piece.length === 0) return;
    this.pieces.push(piece);
    this.queued += piece.length;
  }

  /** Up to `n` bytes from the front, left queued. */
  peek(n: number): Buffer {
    const count = Math.min(n, this.queued);
    if (count === 0) return EMPTY;
    const first = this.pieces[this.head];
    if (first.length >= count) return first.subarray(0, count);
    return this.gather(count);
  }

  /** The next `n` bytes, removed; a RangeError when fewer are queued. */
  take(n: number): Buffer {
    this.check(n);
    if (n === 0) return EMPTY;
    const first = this.pieces[this.head];
    const out = first.length >= n ? first.subarray(0, n) : this.gather(n);
    this.drop(n);
    return out;
  }

  /** Removes the next `n` bytes without reading them; a RangeError when fewer are queued. */
  skip(n: number): void {
    this.check(n);
    this.drop(n);
  }

  private check(n: number): void {
    if (n > this.queued) throw new RangeError(`${n} bytes asked of a queue that holds ${this.queued}`);
  }

  /** A copy of the next `n` bytes, which span pieces. */
  private gather(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    for (let i = this.head, filled = 0; filled < n; i++) filled += this.pieces[i].copy(out, filled, 0, n - filled);
    return out;
  }

  private drop(n: number): void {
    this.queued -= n;
    for (let left = n; left > 0; ) {
      const first = this.pieces[this.head];
      if (first.length <= left) {
        left -= first.length;
        this.pieces[this.head++] = EMPTY; // not kept alive by the array until it is compacted
      } else {
        this.pieces[this.head] = first.subarray(left);
        left = 0;
      }
    }
    // The array is compacted once half of it is spent, so a long-lived queue neither grows nor copies per take.
    if (this.head === this.pieces.length) {
      this.pieces = [];
      this.head = 0;
    } else if (this.head >= 32 && this.head * 2 >= this.pieces.length) {
      this.pieces = this.pieces.slice(this.head);
      this.head = 0;
    }
  }
}
