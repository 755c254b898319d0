import { IntegrityError } from '../common/errors.js';

/*
 * One event of a delta: `{"etcdEvent": <mvccpb.Event as Go's encoding/json writes it>, "time": RFC3339Nano}`.
 * Go writes zero fields as absent, `type` 1 for a DELETE, bytes as base64 and int64 as bare numbers — lease IDs
 * exceed 2^53, so they stay decimal strings here.
 */

export interface DeltaEvent {
  type: 'put' | 'delete';
  key: Buffer;
  /** Empty for a delete. */
  value: Buffer;
  createRevision: number;
  modRevision: number;
  version: number;
  /** Lease ID as a decimal string; '0' for none. */
  lease: string;
  /** When the sidecar saw the event (RFC 3339). */
  time: string;
}

const INT64 = /^-?\d{1,19}$/;

/**
 * One array element's bytes as an event. An element in the exact layout Go's encoder writes (every delta ours or
 * ebr's holds) is read field by field from the bytes (readGoLayout); anything else goes through JSON.parse
 * (decodeDeltaEvent), which also names what is wrong with it. Both give the same event for the same element.
 */
export function decodeDeltaElement(bytes: Buffer): DeltaEvent {
  return readGoLayout(bytes) ?? decodeDeltaEvent(bytes.toString('utf8'));
}

/** Parses and validates one element; anything unexpected is an IntegrityError naming the field. */
export function decodeDeltaEvent(json: string): DeltaEvent {
  let raw: unknown;
  try {
    // The reviver keeps the lease's source digits: JSON numbers past 2^53 lose precision. It is slow, and only
    // events with a lease need it (no base64 or time string can hold the quoted name).
    raw = json.includes('"lease"')
      ? JSON.parse(json, function (this: unknown, key: string, value: unknown, context?: { source?: string }) {
          return key === 'lease' && context?.source ? context.source : value;
        } as never)
      : JSON.parse(json);
  } catch (err) {
    throw new IntegrityError(`delta event is not JSON: ${(err as Error).message}`);
  }
  const event = (raw as { etcdEvent?: { type?: unknown; kv?: Record<string, unknown> } })?.etcdEvent;
  const kv = event?.kv;
  if (!kv || typeof kv !== 'object' || typeof kv.key !== 'string')
    throw new IntegrityError('delta event has no kv.key');
  const type = event.type === undefined || event.type === 0 ? 'put' : event.type === 1 ? 'delete' : undefined;
  if (!type) throw new IntegrityError(`delta event has an unknown type ${JSON.stringify(event.type)}`);
  const num = (name: string): number => {
    const v = kv[name] ?? 0;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      throw new IntegrityError(`delta event kv.${name} is not a revision`);
    return v;
  };
  const lease = String(kv.lease ?? '0');
  if (!INT64.test(lease)) throw new IntegrityError('delta event kv.lease is not an int64');
  const time = (raw as { time?: unknown }).time;
  return checked({
    type,
    key: Buffer.from(kv.key, 'base64'),
    value: typeof kv.value === 'string' ? Buffer.from(kv.value, 'base64') : Buffer.alloc(0),
    createRevision: num('create_revision'),
    modRevision: num('mod_revision'),
    version: num('version'),
    lease,
    time: typeof time === 'string' ? time : '',
  });
}

function checked(event: DeltaEvent): DeltaEvent {
  if (event.modRevision === 0) throw new IntegrityError('delta event has no kv.mod_revision');
  return event;
}

const ascii = (s: string) => Buffer.from(s, 'latin1');
const HEAD = ascii('{"etcdEvent":{');
const DELETE = ascii('"type":1,');
const KEY = ascii('"kv":{"key":"');
const NUMBERS = [ascii(',"create_revision":'), ascii(',"mod_revision":'), ascii(',"version":')] as const;
const VALUE = ascii(',"value":"');
const LEASE = ascii(',"lease":');
const TIME = ascii('}},"time":"');
const QUOTE = 0x22;
/** Printable ASCII but `"` and `\`: a JSON string's characters that stand for themselves. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * The element read in Go's exact layout — `{"etcdEvent":{["type":1,]"kv":{"key":"…"[,"create_revision":N]
 * [,"mod_revision":N][,"version":N][,"value":"…"][,"lease":N]}},"time":"…"}` with no spaces or escapes — or
 * undefined for anything else, which JSON.parse then reads (or rejects). Saves decoding the element to a string
 * and building its objects: most of a replay's parsing time.
 */
function readGoLayout(b: Buffer): DeltaEvent | undefined {
  let at = 0;
  const literal = (word: Buffer): boolean => {
    if (b.length - at < word.length) return false;
    for (let i = 0; i < word.length; i++) if (b[at + i] !== word[i]) return false;
    at += word.length;
    return true;
  };
  /** A string's characters up to its closing quote. */
  const string = (): string | undefined => {
    const end = b.indexOf(QUOTE, at);
    if (end < 0) return undefined;
    const s = b.toString('latin1', at, end);
    at = end + 1;
    return s;
  };
  /** Digits as JSON writes a number (no leading zero), `-` allowed for the lease alone. */
  const digits = (signed: boolean): string | undefined => {
    const start = at;
    if (signed && b[at] === 0x2d) at++;
    const first = at;
    while (at < b.length && b[at] >= 0x30 && b[at] <= 0x39) at++;
    if (at === first || (b[first] === 0x30 && at - first > 1)) return undefined;
    return b.toString('latin1', start, at);
  };
  if (!literal(HEAD)) return undefined;
  const type = literal(DELETE) ? 'delete' : 'put';
  if (!literal(KEY)) return undefined;
  const key = base64(string());
  if (key === undefined) return undefined;
  const numbers = [0, 0, 0];
  for (const [i, name] of NUMBERS.entries()) {
    if (!literal(name)) continue;
    const n = digits(false);
    if (n === undefined || n.length > 15) return undefined;
    numbers[i] = Number(n);
  }
  let value: Buffer | undefined;
  if (literal(VALUE)) {
    value = base64(string());
    if (value === undefined) return undefined;
  }
  let lease = '0';
  if (literal(LEASE)) {
    const n = digits(true);
    if (n === undefined || !INT64.test(n)) return undefined;
    lease = n;
  }
  if (!literal(TIME)) return undefined;
  const time = string();
  if (time === undefined || !PLAIN.test(time) || at !== b.length - 1 || b[at] !== 0x7d) return undefined;
  return checked({
    type,
    key,
    value: value ?? Buffer.alloc(0),
    createRevision: numbers[0],
    modRevision: numbers[1],
    version: numbers[2],
    lease,
    time,
  });
}

/**
 * Padded base64 as Go writes it, decoded; undefined when the string holds anything else (an escape, a character
 * outside the alphabet, padding inside), which Node's decoder would skip: then fewer bytes come out than the
 * length promises. So the characters are checked by the decoder itself, not by a pass of their own.
 */
function base64(s: string | undefined): Buffer | undefined {
  if (s === undefined || s.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(s, 'base64');
  const padding = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  return bytes.length === (s.length / 4) * 3 - padding ? bytes : undefined;
}
