/** CRC-32C (Castagnoli), the checksum GCS reports in `x-goog-hash` and object resources. */
const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

export class Crc32c {
  private crc = 0xffffffff;

  update(data: Uint8Array): this {
    let crc = this.crc;
    for (let i = 0; i < data.length; i++) crc = TABLE[(crc ^ data[i]) & 0xff] ^ (crc >>> 8);
    this.crc = crc;
    return this;
  }

  copy(): Crc32c {
    const other = new Crc32c();
    other.crc = this.crc;
    return other;
  }

  /** Big-endian, base64: the form GCS uses. */
  base64(): string {
    const out = Buffer.alloc(4);
    out.writeUInt32BE((this.crc ^ 0xffffffff) >>> 0);
    return out.toString('base64');
  }
}
