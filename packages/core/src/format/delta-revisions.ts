import type { DeltaEvent } from './delta-format.js';

/** The events one etcd write produced: applied together they recreate that revision exactly. */
export interface Revision {
  revision: number;
  /** In their original order (etcd's `sub` order: puts and deletes as the txn made them). */
  events: DeltaEvent[];
}

/**
 * Groups a stream of events (in revision order) into revisions. Memory holds one revision at a time, so it is
 * bounded by the largest single write, not by the delta's size.
 */
export async function* groupRevisions(events: AsyncIterable<DeltaEvent>): AsyncGenerator<Revision> {
  let current: Revision | undefined;
  for await (const event of events) {
    if (current && event.modRevision === current.revision) {
      current.events.push(event);
      continue;
    }
    if (current) yield current;
    current = { revision: event.modRevision, events: [event] };
  }
  if (current) yield current;
}
