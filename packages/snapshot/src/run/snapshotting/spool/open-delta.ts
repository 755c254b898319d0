import type { Writable } from 'node:stream';
import {
  addRange,
  type CompressionPolicy,
  compressionSuffix,
  compressor,
  DeltaEncoder,
  type DeltaEvent,
  formatReadBack,
  type RevisionRanges,
  snapshotName,
} from '@etcd-steward/core/format';
import type { Spool, SpoolDraft, SpooledDelta } from './spool.js';

/**
 * The delta being written: watched events go through the delta encoder and the compressor into a part file in
 * the spool as they arrive, so the sidecar holds none of them in memory, however large a delta grows; `finish`
 * makes it the next spooled delta. Its events continue the chain: the first at `startRevision`, then revisions
 * without gaps, whole (the watch delivers whole revisions, and a delta is only finished between two batches).
 */
export class OpenDelta {
  /** The newest revision written; `startRevision - 1` before the first event. */
  lastRevision: number;
  /** When its oldest event was seen (ms since the epoch), for the delta lag. */
  private oldestEventAt = 0;
  /** The revisions written that were read back from etcd's history rather than received live (format/read-back.ts). */
  private readonly readBack: RevisionRanges = [];

  private readonly encoder = new DeltaEncoder();
  private readonly draft: SpoolDraft;

  private constructor(
    spool: Spool,
    readonly startRevision: number,
    private readonly compression: CompressionPolicy,
    private readonly line: number,
  ) {
    this.lastRevision = startRevision - 1;
    this.draft = spool.begin(this.encoder, compressor(compression));
  }

  /** `line`: the history line of the watch it is written from (SpooledDelta.line). */
  static begin(spool: Spool, startRevision: number, compression: CompressionPolicy, line: number): OpenDelta {
    return new OpenDelta(spool, startRevision, compression, line);
  }

  /** Bytes of delta JSON written so far: what `--delta-snapshot-memory-limit` limits. */
  get bytes(): number {
    return this.encoder.bytes;
  }

  /** Why `events` cannot come next in this delta, or undefined when they can. */
  gap(events: readonly DeltaEvent[]): string | undefined {
    let current = this.lastRevision;
    for (const e of events) {
      if (e.modRevision === current && current >= this.startRevision) continue; // another event of the same revision
      if (e.modRevision !== current + 1) return `expected revision ${current + 1}, got ${e.modRevision}`;
      current = e.modRevision;
    }
    return undefined;
  }

  /**
   * Writes `events` (which `gap` accepted); waits while the compressor or the disk is behind. `readBack`: they were
   * read back from etcd's history, not received live (WatchBatch.readBack).
   */
  async add(events: readonly DeltaEvent[], readBack = false): Promise<void> {
    if (events.length === 0) return;
    if (readBack) addRange(this.readBack, events[0].modRevision, events[events.length - 1].modRevision);
    if (this.oldestEventAt === 0) this.oldestEventAt = Date.parse(events[0].time);
    for (const e of events) {
      if (this.encoder.destroyed) throw writeFailure(this.encoder);
      if (!this.encoder.write(e)) await drained(this.encoder);
    }
    this.lastRevision = events[events.length - 1].modRevision;
  }

  /** Ends the delta and queues it in the spool, durably, named for its revisions. */
  async finish(): Promise<SpooledDelta> {
    this.encoder.end();
    return this.draft.commit({
      name: snapshotName({
        kind: 'Incr',
        startRevision: this.startRevision,
        lastRevision: this.lastRevision,
        createdAt: Math.floor(Date.now() / 1000),
        compression: compressionSuffix(this.compression),
        final: false,
      }),
      startRevision: this.startRevision,
      lastRevision: this.lastRevision,
      oldestEventAt: this.oldestEventAt,
      line: this.line,
      readBack: formatReadBack(this.readBack),
    });
  }

  /** Drops what was written: its events will be read from etcd again. */
  discard(): Promise<void> {
    return this.draft.discard();
  }
}

/** Resolves once `stream` takes writes again; rejects if it was destroyed instead (the spool write failed). */
function drained(stream: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    if (stream.destroyed) return reject(writeFailure(stream));
    const settle = () => {
      stream.off('drain', settle);
      stream.off('close', settle);
      if (stream.destroyed) reject(writeFailure(stream));
      else resolve();
    };
    stream.on('drain', settle);
    stream.on('close', settle);
  });
}

function writeFailure(stream: Writable): Error {
  return stream.errored ?? new Error('the delta file was closed before the delta was finished');
}
