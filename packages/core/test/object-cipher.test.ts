import { ObjectCipher, parseKeyFile } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

describe('ObjectCipher', () => {
  const keys = parseKeyFile(`k ${'11'.repeat(32)}\n`, 'keys.txt');

  it('seals an object with its name once only: a second seal under the same nonce would give away its GHASH key', () => {
    const cipher = new ObjectCipher(keys.current);
    expect(cipher.nameSeal('v2/Full-00000000-00000001-1700000000.zst')).toBeInstanceOf(Buffer);
    expect(() => cipher.nameSeal('v2/Full-00000000-00000002-1700000000.zst')).toThrow(
      'an encrypted object is sealed with its name once only',
    );
  });

  it('seals with the name given at construction when it ends, and refuses a further seal', async () => {
    const cipher = new ObjectCipher(keys.current, 'v2/Incr-00000001-00000002-1700000000.zst');
    cipher.end(Buffer.from('delta'));
    for await (const _ of cipher) {
      // drain
    }
    expect(() => cipher.nameSeal('v2/Incr-00000001-00000002-1700000000.zst')).toThrow(/once only/);
  });
});
