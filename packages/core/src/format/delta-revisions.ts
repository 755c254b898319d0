import type { DeltaEvent } from './delta-format.js';

/** The events one etcd write produced: applied together they recreate that revision exactly. */
export interface Revision {
  revision: number;
  /** In their original order (etcd's `sub` order: puts and deletes as the txn made them). */
  events: DeltaEvent[];
}

/**
 * Groups events, given in revision order, into revisions: each event hands back the revision it shows to be
 * complete (the one before it), and `end` the last. Holds one revision at a time, so memory is bounded by the
 * largest single write, not by the delta's size.
 */
export class RevisionGrouper {
  private current?: Revision;

  /** Takes the next event; returns the revision it completes, if it starts a new one. */
  take(event: DeltaEvent): Revision | undefined {
    const current = this.current;
    if (current && event.modRevision === current.revision) {
      current.events.push(event);
      return undefined;
    }
    this.current = { revision: event.modRevision, events: [event] };
    return current;
  }

  /** The last revision, once no event follows. */
  end(): Revision | undefined {
    const last = this.current;
    this.current = undefined;
    return last;
  }
}
