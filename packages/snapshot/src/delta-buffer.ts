import type { DeltaEvent } from '@etcd-steward/core';

/** Field names, revisions and time an event adds to the delta's JSON besides its base64 key and value. */
const EVENT_OVERHEAD = 160;

/**
 * The watched events not yet written into a delta, whole revisions only (etcd's watch delivers whole
 * revisions). Sized as the delta's JSON would be, which is what `--delta-snapshot-memory-limit` limits.
 */
export class DeltaBuffer {
  private events: DeltaEvent[] = [];
  /** Estimated size of the events as delta JSON. */
  bytes = 0;
  /** The newest revision held; 0 when empty. */
  lastRevision = 0;

  get empty(): boolean {
    return this.events.length === 0;
  }

  get count(): number {
    return this.events.length;
  }

  /** When the oldest held event was seen (RFC 3339), for the delta lag. */
  get oldestTime(): string | undefined {
    return this.events[0]?.time;
  }

  /** Keeps the events newer than `covered`, the revision the chain already reaches. */
  add(events: DeltaEvent[], covered: number): void {
    for (const e of events) {
      if (e.modRevision <= covered) continue;
      this.events.push(e);
      this.bytes += sizeOf(e);
      this.lastRevision = e.modRevision;
    }
  }

  /** Forgets the events a full snapshot at `revision` now covers. */
  dropThrough(revision: number): void {
    if (this.lastRevision <= revision) return this.clear();
    const keep = this.events.findIndex((e) => e.modRevision > revision);
    for (const e of this.events.slice(0, keep)) this.bytes -= sizeOf(e);
    this.events = this.events.slice(keep);
  }

  /** Hands over every held event and empties the buffer. */
  take(): DeltaEvent[] {
    const events = this.events;
    this.clear();
    return events;
  }

  clear(): void {
    this.events = [];
    this.bytes = 0;
    this.lastRevision = 0;
  }
}

function sizeOf(e: DeltaEvent): number {
  return Math.ceil(e.key.length / 3) * 4 + Math.ceil(e.value.length / 3) * 4 + EVENT_OVERHEAD;
}
