import { IntegrityError, ObjectCipher, parseKeyFile, parseManifest } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

/** The first bytes an encrypted object starts with: its header. */
async function headerOf(name: string): Promise<Buffer> {
  const keys = parseKeyFile(`k1 ${'11'.repeat(32)}`, 'keys');
  const cipher = new ObjectCipher(keys.current, name);
  const first = await new Promise<Buffer>((resolve) => cipher.once('data', resolve));
  cipher.destroy();
  return first;
}

describe("a tar file's manifest, untrusted input (docs/copy-backups.md §2)", () => {
  const name = 'v2/Incr-00000011-00000020-1700000000.zst';
  const manifest = (encryption: unknown) =>
    JSON.stringify({
      format: 'etcd-copy-backups/1',
      source: 'file:///backups',
      createdAt: '2026-11-25T00:00:00.000Z',
      objects: [{ name, size: 100, kind: 'Incr', startRevision: 11, lastRevision: 20, metadata: {}, encryption }],
    });

  it("takes an encrypted snapshot's key id, stored sha256 and header, and refuses them malformed", async () => {
    const header = (await headerOf(name)).toString('base64');
    const sound = { keyId: 'k1', sha256: 'ab'.repeat(32), header };
    expect(parseManifest(manifest(sound), 'x.tar').objects[0].encryption).toEqual(sound);
    const version1 = Buffer.from(header, 'base64');
    version1[8] = 1;
    for (const bad of [
      { ...sound, keyId: 'k2' },
      { ...sound, sha256: 'AB'.repeat(32) },
      { ...sound, sha256: undefined },
      { ...sound, header: header.slice(0, 40) },
      { ...sound, header: version1.toString('base64') },
      { ...sound, header: `${header}!` },
      'k1',
      null,
    ]) {
      expect(() => parseManifest(manifest(bad), 'x.tar'), JSON.stringify(bad)).toThrow(IntegrityError);
      expect(() => parseManifest(manifest(bad), 'x.tar')).toThrow(
        `x.tar: its manifest describes the encryption of ${name} in a way no export does; it was not written by etcd-copy-backups export`,
      );
    }
  });
});
