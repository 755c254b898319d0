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

/** The fields of one message, in wire order. Throws on malformed input (the caller names the source). */
export function readFields(msg: Buffer): ProtoField[] {
  const fields: ProtoField[] = [];
  let at = 0;
  while (at < msg.length) {
    const [tag, afterTag] = readVarint(msg, at);
    const field = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    at = afterTag;
    if (wire === 0) {
      const [varint, next] = readVarint(msg, at);
      fields.push({ field, varint });
      at = next;
    } else if (wire === 2) {
      const [length, start] = readVarint(msg, at);
      const end = start + Number(length);
      if (end > msg.length) throw new Error('protobuf field runs past its message');
      fields.push({ field, bytes: msg.subarray(start, end) });
      at = end;
    } else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
    } else {
      throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }
  return fields;
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
