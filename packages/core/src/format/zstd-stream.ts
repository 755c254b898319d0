import { Transform, type TransformCallback } from 'node:stream';
import zstd from 'zstd-napi/binding.js';

/*
 * zstd streams over libzstd itself (through zstd-napi) rather than Node's zlib zstd, measured on a 276 MB
 * snapshot (docs/performance.md): compressing at level 1 took half the CPU time of Node's (0.5 vs 0.9 s),
 * and zstd's own worker threads work here; a download's decompress-and-check pipeline took 0.7–0.8 s
 * against 2.4–2.7 s; and every frame of a multi-frame file is read (Node's decoder stops after the first).
 *
 * Both calls are synchronous. Compressing with workers, they do the work and this thread only hands input
 * over and takes output back; decompressing runs here at ~1.4 GB/s.
 */

/** Output goes on in full buffers: a buffer handed on holds its whole allocation until the next stage is done. */
const OUTPUT = 128 << 10;
/**
 * What a worker compresses at a time, zstd's smallest. zstd holds about twice as many jobs as it has workers, in
 * and out, and at level 1 its own size would be 2 MiB: `etcd-snapshot save` peaked 8–11 MB higher with it
 * (docs/performance.md, `etcd-snapshot save` ≤ 100 MB).
 */
const JOB_SIZE = 512 << 10;
const EMPTY = Buffer.alloc(0);

/**
 * Compresses into one zstd frame, which the `zstd` command and any zstd decoder read.
 *
 * Not Node's zlib zstd with `ZSTD_c_nbWorkers`: with workers, a zstd call may return having taken only part
 * of its input while output space is left, which Node's zlib stream reads as the end of the data — it ends
 * the stream, drops the rest of that chunk and then fails with ERR_STREAM_PUSH_AFTER_EOF. Here each chunk
 * is fed until zstd has taken all of it. When the workers fall behind, a call waits for them, which holds
 * back the stages before this one.
 */
export class ZstdCompress extends Transform {
  private readonly cctx = new zstd.CCtx();
  private readonly out = new OutputBuffer(this);

  constructor(options: { level: number; workers: number }) {
    super();
    this.cctx.setParameter(zstd.CParameter.compressionLevel, options.level);
    this.cctx.setParameter(zstd.CParameter.nbWorkers, options.workers);
    if (options.workers > 0) this.cctx.setParameter(zstd.CParameter.jobSize, JOB_SIZE);
    // A content checksum (xxh64: ~0.04 s of CPU time for 276 MB) lets any zstd decoder, `zstd -t` too, see damage.
    this.cctx.setParameter(zstd.CParameter.checksumFlag, 1);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      let input = chunk;
      while (input.length > 0) {
        const [, produced, consumed] = this.cctx.compressStream2(this.out.space(), input, zstd.EndDirective.continue);
        this.out.took(produced);
        input = input.subarray(consumed);
      }
      done();
    } catch (err) {
      done(zstdError(err, 'compress'));
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      for (;;) {
        const [left, produced] = this.cctx.compressStream2(this.out.space(), EMPTY, zstd.EndDirective.end);
        this.out.took(produced);
        if (left === 0) break;
      }
      this.out.handOn();
      done();
    } catch (err) {
      done(zstdError(err, 'compress'));
    }
  }
}

/**
 * Decompresses zstd data of one or more frames (concatenated frames decompress to their contents in order).
 *
 * A few KiB of input can decode to gigabytes, so the output waits for the reader: when a push says the
 * readable side is full, decoding stops mid-chunk and goes on when the reader asks for more. Without that,
 * one damaged or hostile object from the store would fill memory outside the JS heap, in one call.
 */
export class ZstdDecompress extends Transform {
  private readonly dctx = idleContexts.pop() ?? new zstd.DCtx();
  private readonly out = new OutputBuffer(this);
  private inFrame = false;
  /** The rest of a chunk whose decoding waits for the reader, and the chunk's callback. */
  private paused?: { input: Buffer; done: TransformCallback };

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.decode(chunk, done);
  }

  override _read(size: number): void {
    const paused = this.paused;
    if (paused) {
      this.paused = undefined;
      this.decode(paused.input, paused.done);
    }
    // Done with the chunk: the transform may hold its write callback for a read that has now come.
    if (!this.paused) super._read(size);
  }

  private decode(chunk: Buffer, done: TransformCallback): void {
    try {
      let input = chunk;
      for (;;) {
        const space = this.out.space();
        const [hint, produced, consumed] = this.dctx.decompressStream(space, input);
        input = input.subarray(consumed);
        // zstd says 0 once a frame is whole; a call that took and gave nothing says what the next frame needs.
        if (consumed > 0 || produced > 0) this.inFrame = hint !== 0;
        const readerWantsMore = this.out.took(produced);
        // A full output buffer may leave decoded bytes inside zstd: call again even without input.
        if (input.length === 0 && produced < space.length) break;
        if (!readerWantsMore) {
          this.paused = { input, done };
          return;
        }
      }
      done();
    } catch (err) {
      done(zstdError(err, 'decompress'));
    }
  }

  override _flush(done: TransformCallback): void {
    if (this.inFrame) {
      return done(zstdError(new Error('unexpected end of input: the data is truncated'), 'decompress'));
    }
    this.out.handOn();
    done();
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    this.paused = undefined;
    try {
      this.dctx.reset(zstd.ResetDirective.sessionAndParameters);
      if (idleContexts.length < IDLE_CONTEXTS) idleContexts.push(this.dctx);
    } catch {
      // a context zstd cannot reset is left to the garbage collector
    }
    done(err);
  }
}

/**
 * Decompression contexts of ended streams, for the next ones. A context keeps its window buffer (up to a frame's
 * window, MBs) in native memory, which only a major garbage collection of its JS object would free: a restore
 * decompressing its deltas one after another held ~15 MB more for contexts of streams long ended.
 */
const idleContexts: InstanceType<typeof zstd.DCtx>[] = [];
const IDLE_CONTEXTS = 4;

/** A stream's output buffer, filled by zstd calls and pushed once full (or at the end). */
class OutputBuffer {
  private buffer = Buffer.allocUnsafe(OUTPUT);
  private used = 0;

  constructor(private readonly stream: Transform) {}

  space(): Buffer {
    return this.buffer.subarray(this.used);
  }

  /** Counts what zstd wrote; false when the buffer went on and the reader wants no more for now. */
  took(produced: number): boolean {
    this.used += produced;
    return this.used === this.buffer.length ? this.handOn() : true;
  }

  handOn(): boolean {
    if (this.used === 0) return true;
    const wantsMore = this.stream.push(
      this.used === this.buffer.length ? this.buffer : this.buffer.subarray(0, this.used),
    );
    this.buffer = Buffer.allocUnsafe(OUTPUT);
    this.used = 0;
    return wantsMore;
  }
}

/** zstd-napi's errors carry no code; callers tell decompression failures by a `ZSTD_` code, as with Node's zlib. */
function zstdError(err: unknown, what: 'compress' | 'decompress'): Error {
  const message = err instanceof Error ? err.message : String(err);
  return Object.assign(new Error(`zstd cannot ${what}: ${message}`, { cause: err }), { code: 'ZSTD_error' });
}
