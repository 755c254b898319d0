import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ebrStoreObject } from '../../../test/fixtures.js';
import { decodeDeltaElement } from '../src/format/delta-event.js';
import {
  DeltaDecoder,
  DeltaEncoder,
  type DeltaEvent,
  decodeDeltaEvent,
  encodeDelta,
  encodeDeltaEvent,
  verifyDelta,
} from '../src/format/delta-format.js';

const fixture = (name: string) => readFile(ebrStoreObject(name));

async function decode(bytes: Buffer, chunk = bytes.length): Promise<DeltaEvent[]> {
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) chunks.push(bytes.subarray(i, i + chunk));
  const out: DeltaEvent[] = [];
  for await (const e of Readable.from(chunks).pipe(new DeltaDecoder('test'))) out.push(e);
  return out;
}

/** A put of key `k` at revision 5, with what the test changes. */
function putEvent(changes: Partial<DeltaEvent> = {}): DeltaEvent {
  return {
    type: 'put',
    key: Buffer.from('k'),
    value: Buffer.from('v'),
    createRevision: 5,
    modRevision: 5,
    version: 1,
    lease: '0',
    time: '2026-01-01T00:00:00Z',
    ...changes,
  };
}

async function collect(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c);
  return Buffer.concat(parts);
}

describe('delta format (ebr-compatible)', () => {
  it("reads ebr's deltas and writes them back byte for byte", async () => {
    for (const [name, gz] of [
      ['Incr-00000004-00000007-1795299359.gz', true],
      ['Incr-00000008-00000008-1795299383', false],
    ] as const) {
      const raw = gz ? gunzipSync(await fixture(name)) : await fixture(name);
      for (const chunk of [1, 5, 64, raw.length]) {
        const events = await decode(raw, chunk);
        expect(await collect(encodeDelta(events))).toEqual(raw);
      }
    }
  });

  it('decodes puts and deletes as etcd recorded them', async () => {
    const events = await decode(await fixture('Incr-00000008-00000008-1795299383'));
    expect(
      events.map((e) => [e.type, e.key.toString(), e.value.toString(), e.modRevision, e.createRevision, e.version]),
    ).toEqual([
      ['put', '/t1', 'x', 8, 8, 1],
      ['put', '/t2', 'y', 8, 8, 1],
      ['delete', '/k1', '', 8, 0, 0],
    ]);
  });

  it('keeps lease IDs beyond 2^53 exact', async () => {
    const e = putEvent({ lease: '7587869413498472327' });
    expect(encodeDeltaEvent(e)).toContain('"lease":7587869413498472327');
    const [back] = await decode(await collect(encodeDelta([e])));
    expect(back.lease).toBe('7587869413498472327');
  });

  it('encodes the same bytes however small its chunks, and counts the JSON', async () => {
    const raw = await fixture('Incr-00000008-00000008-1795299383');
    const events = await decode(raw);
    for (const chunkSize of [1, 16, 100, 64 << 10]) {
      const encoder = new DeltaEncoder(chunkSize);
      const out = collect(encoder);
      for (const e of events) encoder.write(e);
      encoder.end();
      expect(await out).toEqual(raw);
      expect(encoder.bytes).toBe(raw.length - 32);
    }
  });

  it('splits events at the right braces whatever their strings escape, however the chunks fall', async () => {
    const e = putEvent();
    // quotes, braces and backslash runs of both parities inside strings: none of them ends an event
    const times = ['a\\"}{]', '\\\\', '"', '}\\', '\\\\\\"}'];
    const elements = times.map((time) => encodeDeltaEvent(e).replace('"2026-01-01T00:00:00Z"', JSON.stringify(time)));
    const json = Buffer.from(`[${elements.join(',')}]`);
    const raw = Buffer.concat([json, createHash('sha256').update(json).digest()]);
    const expected = elements.map((element) => decodeDeltaEvent(element));
    expect(expected.map((event) => event.time)).toEqual(times);
    for (let chunk = 1; chunk <= 40; chunk++) expect(await decode(raw, chunk)).toEqual(expected);
  });

  it('rejects damage and truncation', async () => {
    const raw = await fixture('Incr-00000008-00000008-1795299383');
    const flipped = Buffer.from(raw);
    flipped[20] ^= 0x01;
    await expect(verifyDelta(Readable.from([flipped]), 'd')).rejects.toThrow(/damaged|not JSON|kv/);
    await expect(verifyDelta(Readable.from([raw.subarray(0, raw.length - 5)]), 'd')).rejects.toThrow(/truncated/);
    await expect(verifyDelta(Readable.from([raw.subarray(0, 50)]), 'd')).rejects.toThrow(/truncated/);
    expect(await verifyDelta(Readable.from([raw]), 'd')).toEqual({ events: 3, firstRevision: 8, lastRevision: 8 });
  });

  it('reads an element in the layout Go writes as JSON.parse reads it, and leaves any other to JSON.parse', () => {
    const base: DeltaEvent = {
      type: 'put',
      key: Buffer.from('/registry/pods/a'),
      value: Buffer.from([0, 1, 2, 250, 255]),
      createRevision: 3,
      modRevision: 9,
      version: 4,
      lease: '0',
      time: '2026-11-27T05:00:00.123456789Z',
    };
    const cases: DeltaEvent[] = [
      base,
      { ...base, lease: '7587869413498472327' },
      { ...base, lease: '-5' },
      { ...base, type: 'delete', value: Buffer.alloc(0), createRevision: 0, version: 0 },
      { ...base, value: Buffer.alloc(0) },
      { ...base, key: Buffer.from('k'), value: Buffer.from('xy') },
      { ...base, time: '' },
    ];
    for (const e of cases) {
      const json = encodeDeltaEvent(e);
      expect(decodeDeltaElement(Buffer.from(json))).toEqual(decodeDeltaEvent(json));
      expect(decodeDeltaElement(Buffer.from(json))).toEqual(e);
    }
    const json = encodeDeltaEvent(base);
    // other layouts JSON allows, and damage: each read (or refused) exactly as JSON.parse reads it
    const variants = [
      json.replace('{"etcdEvent"', '{ "etcdEvent"'),
      json.replace('"key":"', '"key":"\\u0041'),
      json.replace(',"version":4', ',"version":4.0'),
      json.replace(',"version":4', ',"version":04'),
      json.replace(',"version":4', ',"version":-4'),
      json.replace(',"mod_revision":9', ''),
      json.replace('"value":"', '"value":"\\/'),
      json.replace('"value":"', '"value":"A'),
      json.replace('"value":"', '"value":"=A=='),
      json.replace('"time":"2026', '"time":"\\u0032026'),
      json.replace('"kv":{', '"kv":{"prev_kv":{},'),
      json.replace('}},"time"', ',"lease":0}},"time"'),
    ];
    for (const v of variants) {
      const viaParse = (() => {
        try {
          return decodeDeltaEvent(v);
        } catch (err) {
          return (err as Error).message;
        }
      })();
      const viaElement = (() => {
        try {
          return decodeDeltaElement(Buffer.from(v));
        } catch (err) {
          return (err as Error).message;
        }
      })();
      expect(viaElement, v).toEqual(viaParse);
    }
  });
});
