import { Transform, type TransformCallback } from 'node:stream';
import { MANIFEST_ENTRY, MAX_MANIFEST_BYTES, OBJECTS_FOLDER } from './tar-manifest.js';

/** The name a damaged header is given in its place: the import reports the object it stood for and goes on. */
export const DAMAGED_HEADER = 'damaged-header/';

const BLOCK = 512;
const padded = (size: number) => Math.ceil(size / BLOCK) * BLOCK;

/**
 * Lets a tar import go past a damaged entry header. A tar parser (tar-stream) stops at the first header whose
 * checksum fails, since without the header it cannot tell where the next one begins; an import would then say only
 * that the file is broken, and store nothing after it. The manifest that `exportBackups` writes first says where
 * every header is (entries follow it in its order, each a 512-byte header and its size padded to 512), so this
 * stream, in front of the parser, reads the manifest as it passes, checks each object's header where it must be
 * (checksum, name, size) and replaces a damaged one with a sound header named `damaged-header/<index>` of the size
 * the manifest gives. The import reports that object as damaged, with `problem(index)` saying what was wrong, and
 * goes on with the next. Bytes pass unchanged otherwise; a header it cannot follow (pax, the parser's extended
 * headers) ends its checking and leaves the rest to the parser as before.
 */
export class TarHeaderGuard extends Transform {
  private pending: Buffer = Buffer.alloc(0);
  /** Bytes passed on so far, and where the next header to check begins (Infinity: no more checking). */
  private position = 0;
  private nextHeader = 0;
  /** -1 while the manifest's header and bytes pass; then the index of the object whose header is next. */
  private index = -1;
  private manifestSize = 0;
  private readonly manifest: Buffer[] = [];
  private sizes: number[] = [];
  private names: string[] = [];
  private readonly problems = new Map<number, string>();

  /** What was wrong with object `index`'s header, when it was replaced. */
  problem(index: number): string | undefined {
    return this.problems.get(index);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    try {
      this.advance();
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    if (this.pending.length > 0) this.push(this.pending);
    done();
  }

  private advance(): void {
    while (this.pending.length > 0) {
      if (this.position < this.nextHeader) {
        const n = Math.min(this.pending.length, this.nextHeader - this.position);
        this.pass(n);
        continue;
      }
      if (this.pending.length < BLOCK) return; // the header's rest comes with the next chunk
      const header = this.pending.subarray(0, BLOCK);
      if (this.index === -1) {
        this.manifestHeader(header);
      } else {
        this.objectHeader(header);
      }
    }
  }

  /** Passes `n` bytes on, keeping the manifest's as they go by. */
  private pass(n: number): void {
    const bytes = this.pending.subarray(0, n);
    if (this.index === -1 && this.position >= BLOCK) {
      const kept = this.manifest.reduce((sum, b) => sum + b.length, 0);
      if (kept < this.manifestSize) this.manifest.push(bytes.subarray(0, this.manifestSize - kept));
    }
    this.push(bytes);
    this.position += n;
    this.pending = this.pending.subarray(n);
    if (this.index === -1 && this.position === this.nextHeader) this.readManifest();
  }

  private manifestHeader(header: Buffer): void {
    const parsed = parseHeader(header);
    // not ours, or damaged where nothing says what it should be: the parser reports it as before
    if (!parsed.sound || parsed.name !== MANIFEST_ENTRY || parsed.size > MAX_MANIFEST_BYTES) return this.stop();
    this.manifestSize = parsed.size;
    this.emitHeader(header);
    this.nextHeader = BLOCK + padded(parsed.size);
  }

  private readManifest(): void {
    try {
      const objects = (JSON.parse(Buffer.concat(this.manifest).toString('utf8')) as { objects: unknown }).objects;
      if (!Array.isArray(objects)) return this.stop();
      this.names = objects.map((o) => String((o as { name: unknown }).name));
      this.sizes = objects.map((o) => Number((o as { size: unknown }).size));
      if (this.sizes.some((s) => !Number.isSafeInteger(s) || s < 0)) return this.stop();
    } catch {
      return this.stop(); // the import says what is wrong with the manifest
    }
    this.index = 0;
    if (this.names.length === 0) this.stop();
  }

  private objectHeader(header: Buffer): void {
    const index = this.index;
    const parsed = parseHeader(header);
    if (parsed.sound && 'xgLK'.includes(parsed.type)) return this.stop();
    const name = `${OBJECTS_FOLDER}${this.names[index]}`;
    const size = this.sizes[index];
    const wrong = !parsed.sound
      ? 'its checksum does not match'
      : parsed.name !== name
        ? `it names "${parsed.name}", not ${name}`
        : parsed.size !== size
          ? `it says ${parsed.size} bytes, not the manifest's ${size}`
          : undefined;
    if (wrong === undefined) {
      this.emitHeader(header);
    } else {
      this.problems.set(index, `its tar header is damaged (${wrong})`);
      this.pending = this.pending.subarray(BLOCK);
      this.push(soundHeader(`${DAMAGED_HEADER}${index}`, size));
      this.position += BLOCK;
    }
    this.nextHeader = this.position + padded(size);
    this.index++;
    if (this.index >= this.names.length) this.nextHeader = Number.POSITIVE_INFINITY;
  }

  private emitHeader(header: Buffer): void {
    this.push(Buffer.from(header));
    this.pending = this.pending.subarray(BLOCK);
    this.position += BLOCK;
  }

  private stop(): void {
    this.nextHeader = Number.POSITIVE_INFINITY;
    this.index = Math.max(this.index, 0);
  }
}

interface ParsedHeader {
  sound: boolean;
  name: string;
  size: number;
  type: string;
}

/** A ustar header's checksum, name (prefix and name), size and type; `sound` is false when its checksum fails. */
function parseHeader(block: Buffer): ParsedHeader {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i];
  const recorded = Number.parseInt(text(block, 148, 8).trim() || 'x', 8);
  const sound = recorded === sum && sum !== 8 * 0x20; // an all-zero block is the archive's end, not a header
  const name = text(block, 0, 100);
  const prefix = block.subarray(257, 262).toString('latin1') === 'ustar' ? text(block, 345, 155) : '';
  return {
    sound,
    name: prefix ? `${prefix}/${name}` : name,
    size:
      block[124] & 0x80 ? base256(block.subarray(125, 136)) : Number.parseInt(text(block, 124, 12).trim() || '0', 8),
    type: String.fromCharCode(block[156]),
  };
}

/** A size past 8 GiB, in the GNU base-256 form tar writers use when the 11 octal digits are too few. */
function base256(bytes: Buffer): number {
  let n = 0;
  for (const b of bytes) n = n * 256 + b;
  return n;
}

function text(block: Buffer, at: number, length: number): string {
  const field = block.subarray(at, at + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? length : end).toString('utf8');
}

/** A plain ustar file header, checksum and all. */
function soundHeader(name: string, size: number): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write('0000644\0', 100, 'latin1');
  block.write('0000000\0', 108, 'latin1');
  block.write('0000000\0', 116, 'latin1');
  if (size > 0o77777777777) {
    block[124] = 0x80;
    for (let i = 135, n = size; i > 124; i--, n = Math.floor(n / 256)) block[i] = n % 256;
  } else {
    block.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  }
  block.write('00000000000\0', 136, 'latin1');
  block.write('0', 156, 'latin1');
  block.write('ustar\0', 257, 'latin1');
  block.write('00', 263, 'latin1');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i];
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}
