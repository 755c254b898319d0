import { createHash, type Hash } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import { type DeltaEvent, decodeDeltaElement } from './delta-event.js';
import { SHA256_TRAILER } from './sha256-trailer.js';

/*
 * A delta snapshot as ebr writes it (and reads it): a JSON array of events (delta-event.ts), then the raw 32-byte
 * sha256 of the JSON bytes; the whole is then compressed.
 */

export { type DeltaEvent, decodeDeltaEvent } from './delta-event.js';

export const DELTA_TRAILER = SHA256_TRAILER;

const ARRAY_END = Buffer.from(']');

/**
 * One array element, with fields in the order and omissions of Go's encoder, handed to `write` in pieces: the
 * base64 of the value on its own, so that an encoder writing into a buffer never joins the whole element first.
 */
export function writeDeltaEvent(e: DeltaEvent, write: (json: string) => void): void {
  write(e.type === 'delete' ? '{"etcdEvent":{"type":1,"kv":{"key":"' : '{"etcdEvent":{"kv":{"key":"');
  write(e.key.toString('base64'));
  let next = '"';
  if (e.createRevision) next += `,"create_revision":${e.createRevision}`;
  if (e.modRevision) next += `,"mod_revision":${e.modRevision}`;
  if (e.version) next += `,"version":${e.version}`;
  if (e.value.length > 0) {
    write(`${next},"value":"`);
    write(e.value.toString('base64'));
    next = '"';
  }
  if (e.lease !== '0' && e.lease !== '') next += `,"lease":${e.lease}`;
  write(`${next}}},"time":${JSON.stringify(e.time)}}`);
}

/** One array element as a string. */
export function encodeDeltaEvent(e: DeltaEvent): string {
  let json = '';
  writeDeltaEvent(e, (piece) => {
    json += piece;
  });
  return json;
}

/**
 * The bytes of a delta (before compression), written one event at a time (object mode): the JSON array, then,
 * when the writer ends, its sha256 trailer. The JSON comes out in chunks of about `chunkSize` bytes rather than
 * a Buffer an event, because every stage after it (the compressor, the file) costs per chunk;
 * and nothing of an event is kept once it is written, so a delta being written holds no more than one chunk.
 */
export class DeltaEncoder extends Transform {
  /** Bytes of JSON so far (what `--delta-snapshot-memory-limit` counts). */
  bytes = 0;
  private readonly hash = createHash('sha256');
  private chunk?: Buffer;
  private used = 0;
  private events = 0;

  constructor(private readonly chunkSize = 64 << 10) {
    super({ writableObjectMode: true });
    this.append('[');
  }

  override _transform(event: DeltaEvent, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.events++ > 0) this.append(',');
    writeDeltaEvent(event, this.append);
    done();
  }

  override _flush(done: TransformCallback): void {
    const tail = Buffer.concat([this.chunk?.subarray(0, this.used) ?? Buffer.alloc(0), ARRAY_END]);
    this.bytes += ARRAY_END.length;
    this.hash.update(tail);
    this.push(Buffer.concat([tail, this.hash.digest()]));
    this.chunk = undefined;
    this.used = 0;
    done();
  }

  private readonly append = (json: string): void => {
    const length = Buffer.byteLength(json);
    this.bytes += length;
    if (this.chunk && this.used + length > this.chunk.length) this.passChunk();
    if (length > this.chunkSize) {
      const whole = Buffer.from(json);
      this.hash.update(whole);
      this.push(whole);
      return;
    }
    this.chunk ??= Buffer.allocUnsafe(this.chunkSize);
    this.used += this.chunk.write(json, this.used);
  };

  /** Passes the filled part of the chunk on; the next event starts a new chunk, since this one is now downstream's. */
  private passChunk(): void {
    if (!this.chunk || this.used === 0) return;
    const out = this.chunk.subarray(0, this.used);
    this.hash.update(out);
    this.push(out);
    this.chunk = undefined;
    this.used = 0;
  }
}

/** The bytes of a delta (before compression) from its events: DeltaEncoder over an iterable. */
export function encodeDelta(events: Iterable<DeltaEvent> | AsyncIterable<DeltaEvent>): Readable {
  const source = Readable.from(events);
  const encoder = new DeltaEncoder();
  source.once('error', (err) => encoder.destroy(err));
  encoder.once('close', () => source.destroy());
  return source.pipe(encoder);
}

/** Bytes looked at one by one before a native search: a native call costs more than a field name's few bytes. */
const SHORT_STRING = 24;

/** The next `"` in `chunk` from `from`, or -1. */
function nextQuote(chunk: Buffer, from: number): number {
  const short = Math.min(chunk.length, from + SHORT_STRING);
  for (let i = from; i < short; i++) if (chunk[i] === 0x22) return i;
  return short === chunk.length ? -1 : chunk.indexOf(0x22, short);
}

/** How many backslashes come right before `at`, back to `from`. */
function backslashesBefore(chunk: Buffer, at: number, from: number): number {
  let i = at;
  while (i > from && chunk[i - 1] === 0x5c) i--;
  return at - i;
}

/**
 * Splits a delta's bytes (decompressed) into events, and fails at the end unless the trailer is the sha256 of the
 * JSON. Events come out before the check, so a caller that must not act on a damaged delta verifies it first
 * (verifyDelta, or fetchDelta's check on the way to a file) and reads it again — then with `verified`, which
 * skips the second sha256 of the same bytes but still requires the array to end in a 32-byte trailer.
 */
export class DeltaParser {
  private readonly hash?: Hash;
  private state: 'start' | 'array' | 'trailer' = 'start';
  private depth = 0;
  private inString = false;
  private escaped = false;
  private element: Buffer[] = [];
  private trailer: Buffer[] = [];
  private trailerBytes = 0;

  constructor(
    private readonly label: string,
    options: { verified?: boolean } = {},
  ) {
    if (!options.verified) this.hash = createHash('sha256');
  }

  /** The events that end in `chunk`, to `emit`; a chunk may be reused once this returns. */
  write(chunk: Buffer, emit: (event: DeltaEvent) => void): void {
    let emitting = false;
    try {
      this.scan(chunk, (event) => {
        emitting = true;
        emit(event);
        emitting = false;
      });
    } catch (err) {
      // what `emit` throws is the caller's own, worded by it
      throw !emitting && err instanceof IntegrityError ? new IntegrityError(`${this.label}: ${err.message}`) : err;
    }
  }

  /** After the last chunk: throws unless the array ended and its trailer is whole (and matches, unless `verified`). */
  end(): void {
    const trailer = Buffer.concat(this.trailer);
    if (this.state !== 'trailer' || trailer.length !== DELTA_TRAILER) {
      throw new IntegrityError(`${this.label} is truncated: the JSON array or its 32-byte sha256 is incomplete`);
    }
    if (this.hash && !this.hash.digest().equals(trailer)) {
      throw new IntegrityError(`${this.label} is damaged: its content does not match its sha256 trailer`);
    }
  }

  private scan(chunk: Buffer, emit: (event: DeltaEvent) => void): void {
    let i = 0;
    if (this.state === 'trailer') return this.addTrailer(chunk);
    let elementStart = this.depth > 0 ? 0 : -1;
    for (; i < chunk.length; i++) {
      const c = chunk[i];
      if (this.state === 'start') {
        if (c === 0x5b) this.state = 'array';
        else if (!isSpace(c)) throw new IntegrityError('a delta must start with a JSON array');
        continue;
      }
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          continue;
        }
        // Base64 values are most of a delta: jump from quote to quote. A quote ends the string unless an odd run
        // of backslashes escapes it; the run ending a chunk escapes the next chunk's first byte.
        let quote = nextQuote(chunk, i);
        while (quote !== -1 && backslashesBefore(chunk, quote, i) % 2 === 1) quote = nextQuote(chunk, quote + 1);
        if (quote === -1) {
          this.escaped = backslashesBefore(chunk, chunk.length, i) % 2 === 1;
          i = chunk.length - 1;
        } else {
          i = quote;
          this.inString = false;
        }
        continue;
      }
      if (c === 0x22) {
        if (this.depth === 0) throw new IntegrityError('a delta array holds a bare string');
        this.inString = true;
      } else if (c === 0x7b) {
        if (this.depth === 0) elementStart = i;
        this.depth++;
      } else if (c === 0x7d) {
        this.depth--;
        if (this.depth === 0) {
          const tail = chunk.subarray(elementStart, i + 1);
          const whole = this.element.length === 0 ? tail : Buffer.concat([...this.element, tail]);
          this.element = [];
          elementStart = -1;
          emit(decodeDeltaElement(whole));
        } else if (this.depth < 0) throw new IntegrityError('a delta has unbalanced braces');
      } else if (this.depth === 0) {
        if (c === 0x5d) {
          this.hash?.update(chunk.subarray(0, i + 1));
          this.state = 'trailer';
          return this.addTrailer(chunk.subarray(i + 1));
        }
        if (c !== 0x2c && !isSpace(c)) throw new IntegrityError('a delta array holds something other than objects');
      }
    }
    if (this.depth > 0 && elementStart >= 0) this.element.push(Buffer.from(chunk.subarray(elementStart)));
    this.hash?.update(chunk);
  }

  private addTrailer(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.trailerBytes += bytes.length;
    if (this.trailerBytes > DELTA_TRAILER) throw new IntegrityError('unexpected bytes after the sha256 trailer');
    this.trailer.push(Buffer.from(bytes));
  }
}

/** DeltaParser as a stream: bytes in, events out (object mode). */
export class DeltaDecoder extends Transform {
  private readonly parser: DeltaParser;

  constructor(label: string, options: { verified?: boolean } = {}) {
    super({ readableObjectMode: true });
    this.parser = new DeltaParser(label, options);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.parser.write(chunk, (event) => this.push(event));
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      this.parser.end();
      done();
    } catch (err) {
      done(err as Error);
    }
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Reads a whole delta through the decoder; resolves with its revision range once the trailer matched. */
export async function verifyDelta(
  bytes: Readable,
  label: string,
): Promise<{ events: number; firstRevision: number; lastRevision: number }> {
  const decoder = bytes.pipe(new DeltaDecoder(label));
  bytes.once('error', (err) => decoder.destroy(err));
  let events = 0;
  let firstRevision = 0;
  let lastRevision = 0;
  for await (const e of decoder as AsyncIterable<DeltaEvent>) {
    if (e.modRevision < lastRevision) throw new IntegrityError(`${label}: revisions go backwards at ${e.modRevision}`);
    if (events === 0) firstRevision = e.modRevision;
    lastRevision = e.modRevision;
    events++;
  }
  return { events, firstRevision, lastRevision };
}
