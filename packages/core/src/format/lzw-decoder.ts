import { Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from '../common/errors.js';

/*
 * Old ebr stores hold `.Z` objects written by Go's compress/lzw with LSB bit order and 8-bit literals (the
 * GIF flavour, not Unix compress(1)): codes start 9 bits wide and grow to 12; 256 clears the table, 257 ends
 * the stream. The writer grows the code width one code later than a reader would naively expect, so the
 * reader grows it when the next code to be defined reaches 1 << width. The table is at most 4096 entries,
 * so memory stays fixed whatever the object's size.
 */

const LITERAL_WIDTH = 8;
const MAX_WIDTH = 12;
const CLEAR = 1 << LITERAL_WIDTH;
const EOF = CLEAR + 1;
const NO_CODE = 0xffff;
const OUT_CHUNK = 64 * 1024;

export class LzwDecoder extends Transform {
  private bits = 0;
  private nBits = 0;
  private width = LITERAL_WIDTH + 1;
  /** The code the next new table entry gets. */
  private hi = EOF;
  private overflow = 1 << (LITERAL_WIDTH + 1);
  private last = NO_CODE;
  private readonly prefix = new Uint16Array(1 << MAX_WIDTH);
  private readonly suffix = new Uint8Array(1 << MAX_WIDTH);
  /** One code's expansion, written right to left. */
  private readonly scratch = new Uint8Array(1 << MAX_WIDTH);
  private out = Buffer.allocUnsafe(OUT_CHUNK);
  private outLength = 0;
  private ended = false;

  constructor(private readonly label = 'the lzw stream') {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      for (let i = 0; i < chunk.length && !this.ended; i++) {
        this.bits |= chunk[i] << this.nBits;
        this.nBits += 8;
        while (this.nBits >= this.width && !this.ended) {
          const code = this.bits & ((1 << this.width) - 1);
          this.bits >>>= this.width;
          this.nBits -= this.width;
          this.decode(code);
        }
      }
      this.flushOut();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    if (!this.ended)
      return done(new IntegrityError(`${this.label} is truncated: the lzw data ends without its end code`));
    done();
  }

  private decode(code: number): void {
    if (code === CLEAR) {
      this.width = LITERAL_WIDTH + 1;
      this.hi = EOF;
      this.overflow = 1 << this.width;
      this.last = NO_CODE;
      return;
    }
    if (code === EOF) {
      this.ended = true;
      return;
    }
    let first: number;
    if (code < CLEAR) {
      if (this.outLength === this.out.length) this.flushOut();
      this.out[this.outLength++] = code;
      first = code;
    } else if (code <= this.hi && (code < this.hi || this.last !== NO_CODE)) {
      first = this.expand(code);
    } else {
      throw new IntegrityError(`${this.label} is damaged: lzw code ${code} is not defined yet`);
    }
    if (this.last !== NO_CODE) {
      this.prefix[this.hi] = this.last;
      this.suffix[this.hi] = first;
    }
    this.last = code;
    this.hi++;
    if (this.hi >= this.overflow) {
      if (this.width === MAX_WIDTH) {
        // The table is full: no new entries until the writer sends a clear code.
        this.last = NO_CODE;
        this.hi--;
      } else {
        this.width++;
        this.overflow <<= 1;
      }
    }
  }

  /** Writes what `code` stands for and returns its first byte. */
  private expand(code: number): number {
    const s = this.scratch;
    let i = s.length;
    let c = code;
    if (code === this.hi) {
      // Not in the table yet: it is the previous string plus that string's first byte.
      let head = this.last;
      while (head >= CLEAR) head = this.prefix[head];
      s[--i] = head;
      c = this.last;
    }
    while (c >= CLEAR) {
      s[--i] = this.suffix[c];
      c = this.prefix[c];
    }
    s[--i] = c;
    if (this.outLength + s.length - i > this.out.length) this.flushOut();
    this.out.set(s.subarray(i), this.outLength);
    this.outLength += s.length - i;
    return c;
  }

  private flushOut(): void {
    if (this.outLength === 0) return;
    this.push(this.out.subarray(0, this.outLength));
    this.out = Buffer.allocUnsafe(OUT_CHUNK);
    this.outLength = 0;
  }
}
