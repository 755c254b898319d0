import { pipeline } from 'node:stream/promises';
import {
  type CompressionPolicy,
  compressor,
  DeltaDecoder,
  type DeltaEvent,
  decompressor,
  encodeDelta,
  parseSnapshotName,
  snapshotName,
} from '@etcd-steward/core/format';
import type { Spool, SpooledDelta } from './spool.js';

/**
 * Rewrites a spooled delta without its events up to `revision`, in its place in the spool: a full snapshot
 * at `revision` covers those, and the next delta in the store must start right after it. Streams; the delta is
 * verified (sha256 trailer) before it is rewritten.
 */
export async function trimDelta(
  spool: Spool,
  delta: SpooledDelta,
  revision: number,
  compression: CompressionPolicy,
): Promise<SpooledDelta> {
  const ref = parseSnapshotName(delta.name)!;
  const decode = () => {
    const decoder = new DeltaDecoder(delta.name);
    const reading = pipeline(spool.read(delta), decompressor(ref.compression), decoder);
    return { events: decoder as DeltaDecoder & AsyncIterable<DeltaEvent>, reading };
  };
  // Events stream out before the trailer is checked: check the whole delta before rewriting it.
  const check = decode();
  await Promise.all([
    check.reading,
    (async () => {
      for await (const _ of check.events);
    })(),
  ]);

  const { events, reading } = decode();
  const kept = (async function* () {
    for await (const e of events) if (e.modRevision > revision) yield e;
  })();
  const startRevision = revision + 1;
  const trimmed = { ...delta, name: snapshotName({ ...ref, startRevision }), startRevision };
  const writing = spool.replace(delta, trimmed, encodeDelta(kept), compressor(compression));
  const [, result] = await Promise.all([reading, writing]).catch((err) => {
    events.destroy();
    throw err;
  });
  return result;
}
