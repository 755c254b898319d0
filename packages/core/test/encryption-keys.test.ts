import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseKeyFile, readKeyFile, UsageError } from '@etcd-steward/core';
import { describe, expect, it, onTestFinished } from 'vitest';

describe('the key file of --encryption-key-file (docs/encryption.md §2)', () => {
  const hex = randomBytes(32).toString('hex');
  const base64 = randomBytes(32).toString('base64');

  it('takes hex and base64 keys, skips comments and blank lines; the first key encrypts, every one decrypts', () => {
    const ring = parseKeyFile(`# keys\n\nnew-2026.11 ${base64}\n  old_1 ${hex}  \n`, 'keys');
    expect(ring.current.id).toBe('new-2026.11');
    expect(ring.current.key).toEqual(Buffer.from(base64, 'base64'));
    expect(ring.byId('old_1')?.key).toEqual(Buffer.from(hex, 'hex'));
    expect(ring.byId('gone')).toBeUndefined();
  });

  it('refuses a malformed file as bad usage, naming the line and never a key', () => {
    for (const [text, says] of [
      ['', /keys holds no key/],
      [`# only a comment\n`, /keys holds no key/],
      [`k1\n`, /keys line 1: write "<key id> <key>"/],
      [`k1 ${hex} extra\n`, /keys line 1: write "<key id> <key>"/],
      [`k/1 ${hex}\n`, /keys line 1: a key id is 1-64 of/],
      [`k1 ${hex.slice(2)}\n`, /keys line 1: key "k1" is not 32 bytes/],
      [`k1 ${randomBytes(16).toString('base64')}\n`, /keys line 1: key "k1" is not 32 bytes/],
      [`k1 ${hex}\n# x\nk1 ${base64}\n`, /keys line 3: key id "k1" is given twice/],
    ] as const) {
      const err = (() => {
        try {
          parseKeyFile(text, 'keys');
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(UsageError);
      expect((err as Error).message).toMatch(says);
      expect((err as Error).message).not.toContain(hex.slice(2, 20));
    }
  });

  it('refuses a key file that others may read or group or others may change, naming the file, its mode and the fix; a Secret with fsGroup (0440) passes', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'key-file-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'keys');
    await writeFile(file, `k1 ${hex}\n`);
    for (const mode of [0o644, 0o604, 0o620, 0o660, 0o602]) {
      await chmod(file, mode);
      expect(() => readKeyFile(file)).toThrow(UsageError);
      expect(() => readKeyFile(file)).toThrow(
        `the encryption key file ${file} has mode 0${mode.toString(8)}: others may read it or group or others may change it; make it its owner's alone: chmod 600 ${file}`,
      );
    }
    for (const mode of [0o600, 0o400, 0o440, 0o640]) {
      await chmod(file, mode);
      expect(readKeyFile(file).current.id).toBe('k1');
    }
  });
});
