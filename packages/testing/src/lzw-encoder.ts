/**
 * An encoder written from the rules of Go's compress/lzw writer (LSB order, 8-bit literals), independent of
 * the decoder: no clear code at the start; after each emitted code the next code `hi` is taken and the width
 * grows when `hi` reaches 1 << width; at code 4095 a clear code is sent and the table starts again; Close
 * emits the pending code (with the same bookkeeping) and then the end code. Tests use it to make the `.Z`
 * objects old ebr versions wrote.
 */
export function goLzwCompress(input: Buffer): Buffer {
  const out: number[] = [];
  let bits = 0;
  let nBits = 0;
  let width = 9;
  let hi = 257;
  let overflow = 512;
  let table = new Map<number, number>();
  const write = (code: number) => {
    bits |= code << nBits;
    nBits += width;
    while (nBits >= 8) {
      out.push(bits & 0xff);
      bits >>>= 8;
      nBits -= 8;
    }
  };
  /** True when the table was reset (the caller then must not add an entry). */
  const incHi = (): boolean => {
    hi++;
    if (hi === overflow) {
      width++;
      overflow <<= 1;
    }
    if (hi === 4095) {
      write(256);
      width = 9;
      hi = 257;
      overflow = 512;
      table = new Map();
      return true;
    }
    return false;
  };
  if (input.length > 0) {
    let code = input[0];
    for (let i = 1; i < input.length; i++) {
      const key = code * 256 + input[i];
      const hit = table.get(key);
      if (hit !== undefined) {
        code = hit;
        continue;
      }
      write(code);
      code = input[i];
      if (incHi()) continue;
      table.set(key, hi);
    }
    write(code);
    incHi();
  }
  write(257);
  if (nBits > 0) out.push(bits & 0xff);
  return Buffer.from(out);
}
