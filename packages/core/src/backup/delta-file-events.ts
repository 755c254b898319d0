import { open } from 'node:fs/promises';
import { IntegrityError } from '../common/errors.js';
import { type DeltaEvent, DeltaParser } from '../format/delta-format.js';
import type { CatalogEntry } from './snapshot-catalog.js';

// A delta file fetchDelta wrote, read back as events: its own module, so that the replay thread, which reads the
// files its parent fetched, loads neither a store's code nor a decompressor.

/** A delta file is read this much at a time, the next read under way while the last is parsed. */
const READ_SIZE = 1 << 20;
const PARSE_SIZE = 64 << 10;

/**
 * The events of a decompressed delta file, in order, checked against its name as they are read: revisions
 * never go back nor skip one, and span exactly the name's range. Any breach is an IntegrityError. `verified`: the
 * file is what fetchDelta wrote and checked against its trailer, so its sha256 is not taken again.
 */
export async function* readDeltaEvents(
  file: string,
  entry: CatalogEntry,
  label: string,
  options: { verified?: boolean } = {},
): AsyncGenerator<DeltaEvent> {
  const parser = new DeltaParser(label, options);
  const handle = await open(file, 'r');
  let reading: Promise<{ bytesRead: number }> | undefined;
  try {
    let last = 0;
    const events: DeltaEvent[] = [];
    const take = (e: DeltaEvent) => {
      if (last === 0 && e.modRevision < entry.startRevision) {
        throw new IntegrityError(
          `${label} starts at revision ${e.modRevision}, before ${entry.startRevision} as its name says`,
        );
      }
      if (last !== 0 && e.modRevision !== last && e.modRevision !== last + 1) {
        throw new IntegrityError(
          `${label}: its revisions ${e.modRevision < last ? 'go back' : 'skip'} from ${last} to ${e.modRevision}`,
        );
      }
      last = e.modRevision;
      events.push(e);
    };
    // Two buffers in turn: the parser never keeps a chunk (it copies what it holds over), so one can be refilled
    // while the other is parsed.
    const buffers = [Buffer.allocUnsafe(READ_SIZE), Buffer.allocUnsafe(READ_SIZE)];
    let turn = 0;
    reading = handle.read(buffers[turn], 0, READ_SIZE, null);
    for (;;) {
      const { bytesRead } = await reading;
      if (bytesRead === 0) break;
      const filled = buffers[turn];
      turn ^= 1;
      reading = handle.read(buffers[turn], 0, READ_SIZE, null);
      // A piece's events at a time, each handed on before the next piece is parsed: events kept alive across
      // a young-generation collection are copied by it (a whole read's worth cost the replay more than it saved).
      for (let at = 0; at < bytesRead; at += PARSE_SIZE) {
        let fault: unknown;
        try {
          parser.write(filled.subarray(at, Math.min(at + PARSE_SIZE, bytesRead)), take);
        } catch (err) {
          fault = err;
        }
        // the events before a fault are the delta's all the same: a partial restore keeps them
        for (const e of events) yield e;
        events.length = 0;
        if (fault !== undefined) throw fault;
      }
    }
    parser.end();
    if (last !== entry.lastRevision) {
      throw new IntegrityError(`${label} ends at revision ${last}, but its name says ${entry.lastRevision}`);
    }
  } finally {
    await reading?.catch(() => {}); // a reader that stopped early leaves one read under way
    await handle.close();
  }
}
