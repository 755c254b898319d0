import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { IntegrityError } from '../common/errors.js';
import type { KeyRing } from '../format/encryption/encryption-keys.js';
import { EnvelopeCheck } from '../format/encryption/envelope-check.js';
import { ObjectDecipher } from '../format/encryption/object-decipher.js';
import { assertSnapshotName } from '../format/snapshot-name.js';
import { StoredDigest } from '../store/stored-digest.js';
import { type CheckedObject, checkObject, type ObjectCheck } from './object-check.js';
import type { ManifestEncryption, ManifestObject } from './tar-manifest.js';

/**
 * What a tar file's manifest says of an encrypted snapshot, read from its stored bytes: the manifest comes before
 * the snapshots, and no store records the sha256 of encrypted bytes, so an encrypted snapshot is read whole once
 * more for it (streamed, nothing kept but the header). A plain one is read no further than its first bytes:
 * undefined.
 */
export async function readEnvelope(
  body: Readable,
  entry: Pick<CatalogEntry, 'name'>,
  label: string,
  signal?: AbortSignal,
): Promise<ManifestEncryption | undefined> {
  const digest = new StoredDigest();
  const envelope = new EnvelopeCheck(entry.name, label);
  try {
    await pipeline(body, digest, envelope, { signal });
  } catch (err) {
    if (envelope.plain) return undefined;
    throw err;
  }
  const header = envelope.header as Buffer;
  return { keyId: envelope.keyId as string, sha256: digest.sha256(), header: header.toString('base64') };
}

/**
 * The check of a snapshot going into or coming out of a tar file, fed its stored bytes. A plain one is checked as
 * a copy checks it (object-check.ts). An encrypted one stays as stored and is checked by the sha256 of its stored
 * bytes the manifest records, and then: with `keys`, decrypted as it streams (every tag, the name seal) and its
 * content checked as a plain one's; without, only what needs no key, its header and the name its seal gives.
 */
export function tarObjectCheck(object: ManifestObject, label: string, keys?: KeyRing): ObjectCheck {
  const entry = { ...assertSnapshotName(object.name), size: object.size };
  const { encryption } = object;
  if (!encryption) return checkObject(entry, object.metadata, label);
  const stored = new StoredDigest();
  const content = keys ? checkObject(entry, object.metadata, label, { decrypted: () => true }) : undefined;
  const passing = pipeline(
    content
      ? [stored, new ObjectDecipher(keys, object.name, label), content.input]
      : [stored, new EnvelopeCheck(object.name, label)],
  );
  const result = Promise.allSettled([passing, content?.result]).then(([piped, checked]): CheckedObject => {
    // The content's own failure says what is wrong; the stream's may only say that it stopped.
    if (checked.status === 'rejected') throw checked.reason;
    if (piped.status === 'rejected') throw piped.reason;
    if (stored.size !== object.size) {
      throw new IntegrityError(`${label} is truncated: ${stored.size} of its ${object.size} bytes could be read`);
    }
    if (stored.sha256() !== encryption.sha256) {
      throw new IntegrityError(
        `${label} is damaged: its bytes do not match the sha256 the tar file's manifest records`,
      );
    }
    return { ...checked.value, storedSize: stored.size, storedSha256: stored.sha256() };
  });
  return { input: stored, result };
}
