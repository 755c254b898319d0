/**
 * Just enough protobuf to talk to etcd without loading a schema: read fields by number, as varints
 * (bigint, since etcd's IDs are uint64) or byte ranges, skipping unknown ones; write messages.
 */
export interface ProtoField {
  field: number;
  /** Set for varint fields. */
  varint?: bigint;
  /** Set for length-delimited fields (a view, not a copy). */
  bytes?: Buffer;
}

export function readVarint(buf: Buffer, at: number): [bigint, number] {
  let value = 0n;
  let shift = 0n;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    value |= BigInt(buf[i] & 0x7f) << shift;
    shift += 7n;
    if ((buf[i] & 0x80) === 0) return [value, i + 1];
  }
  throw new Error('malformed protobuf varint');
}

/**
 * A varint from buf[at, end) as a number (exact below 2^53: revisions, versions, lengths), or undefined when it
 * does not end there: malformed for a whole message, not yet all arrived for a stream parsed as it comes.
 */
export function readSmallVarint(buf: Buffer, at: number, end: number): { value: number; next: number } | undefined {
  let value = 0;
  for (let i = at, scale = 1; i < end && i < at + 10; i++, scale *= 128) {
    value += (buf[i] & 0x7f) * scale;
    if ((buf[i] & 0x80) === 0) return { value, next: i + 1 };
  }
  return undefined;
}

/** The fields of one message, in wire order. Throws on malformed input (the caller names the source). */
export function readFields(msg: Buffer): ProtoField[] {
  const fields: ProtoField[] = [];
  for (const cursor = new ProtoCursor(msg); cursor.next(); ) {
    if (cursor.wire === 0) fields.push({ field: cursor.field, varint: cursor.bigint() });
    else if (cursor.wire === 2) fields.push({ field: cursor.field, bytes: cursor.bytes() });
  }
  return fields;
}

/**
 * Reads a message's fields one at a time, in place: for hot paths, where readFields' objects and bigints would be
 * most of the garbage (the watch decodes every event of the keyspace). A varint comes as a number, exact below
 * 2^53 (revisions, versions, lengths); `bigint()` reads it exactly (IDs). Skips fixed-width fields' values.
 */
export class ProtoCursor {
  field = 0;
  wire = 0;
  /** The varint's value (wire type 0), or the length of the bytes (wire type 2). */
  value = 0;
  /** Where the varint or the bytes start. */
  start = 0;
  private at: number;

  constructor(
    private readonly msg: Buffer,
    from = 0,
    private readonly end = msg.length,
  ) {
    this.at = from;
  }

  /** Moves to the next field; false at the end of the message. */
  next(): boolean {
    if (this.at >= this.end) return false;
    const tag = this.varint();
    this.field = Math.floor(tag / 8);
    this.wire = tag % 8;
    this.start = this.at;
    if (this.wire === 0) {
      this.value = this.varint();
    } else if (this.wire === 2) {
      this.value = this.varint();
      this.start = this.at;
      this.at += this.value;
      if (this.at > this.end) throw new Error('protobuf field runs past its message');
    } else if (this.wire === 1 || this.wire === 5) {
      this.value = 0;
      this.at += this.wire === 1 ? 8 : 4;
    } else {
      throw new Error(`unsupported protobuf wire type ${this.wire}`);
    }
    return true;
  }

  /** The bytes of a length-delimited field (a view, not a copy). */
  bytes(): Buffer {
    return this.msg.subarray(this.start, this.start + this.value);
  }

  /** The varint exactly, all 64 bits. */
  bigint(): bigint {
    return readVarint(this.msg, this.start)[0];
  }

  /** A cursor over the fields of this length-delimited field (an embedded message). */
  embedded(): ProtoCursor {
    return new ProtoCursor(this.msg, this.start, this.start + this.value);
  }

  private varint(): number {
    // most of etcd's tags and lengths fit one byte: no object for them (a row's fields are read for every key)
    if (this.at < this.end && this.msg[this.at] < 0x80) return this.msg[this.at++];
    const read = readSmallVarint(this.msg, this.at, this.end);
    if (!read) throw new Error('malformed protobuf varint');
    this.at = read.next;
    return read.value;
  }
}

/** A field's value: bytes (length-delimited), or a varint; a bigint is written as uint64, as Go writes an int64. */
export type ProtoValue = Buffer | number | bigint;

/**
 * A message of the fields given, in that order, as gogo marshals proto3: zero numbers and empty bytes are left
 * out. Sized first, then written into one buffer: the direct replay writes a row per event with this.
 */
export function writeMessage(fields: ReadonlyArray<readonly [number, ProtoValue]>): Buffer {
  let size = 0;
  for (const [n, v] of fields) {
    if (Buffer.isBuffer(v)) size += v.length === 0 ? 0 : varintSize(n << 3) + varintSize(v.length) + v.length;
    else if (v !== 0 && v !== 0n) size += varintSize(n << 3) + varintSize(v);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const [n, v] of fields) {
    if (Buffer.isBuffer(v)) {
      if (v.length === 0) continue;
      at = writeVarint(out, at, (n << 3) | 2);
      at = writeVarint(out, at, v.length);
      at += v.copy(out, at);
    } else if (v !== 0 && v !== 0n) {
      at = writeVarint(out, at, n << 3);
      at = writeVarint(out, at, v);
    }
  }
  return out;
}

/** Numbers are safe integers (revisions, sizes); IDs come as bigints. */
function varintSize(v: number | bigint): number {
  let n = 1;
  if (typeof v === 'bigint') {
    for (let x = BigInt.asUintN(64, v); x >= 0x80n; x >>= 7n) n++;
    return n;
  }
  for (let x = v; x >= 0x80; x = Math.floor(x / 0x80)) n++;
  return n;
}

function writeVarint(out: Buffer, at: number, v: number | bigint): number {
  if (typeof v === 'bigint') {
    let x = BigInt.asUintN(64, v);
    while (x >= 0x80n) {
      out[at++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    out[at++] = Number(x);
    return at;
  }
  let x = v;
  while (x >= 0x80) {
    out[at++] = (x % 0x80) | 0x80;
    x = Math.floor(x / 0x80);
  }
  out[at++] = x;
  return at;
}
