/**
 * Just enough protobuf to talk to etcd without loading a schema: read fields by number, as varints
 * (bigint, since etcd's IDs are uint64) or byte ranges, skipping unknown ones; write string fields.
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
    const read = readSmallVarint(this.msg, this.at, this.end);
    if (!read) throw new Error('malformed protobuf varint');
    this.at = read.next;
    return read.value;
  }
}

/** A message of length-delimited (string or bytes) fields, in the order given. */
export function writeBytesFields(fields: Array<[number, string | Buffer]>): Buffer {
  const parts: Buffer[] = [];
  for (const [field, value] of fields) {
    const bytes = Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
    parts.push(writeVarint((field << 3) | 2), writeVarint(bytes.length), bytes);
  }
  return Buffer.concat(parts);
}

function writeVarint(value: number): Buffer {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Buffer.from(out);
}
