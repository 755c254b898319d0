import type { Readable } from 'node:stream';
import { IntegrityError } from '../common/errors.js';
import { ENCRYPTION_MAGIC, isEncrypted } from '../format/encryption/envelope-format.js';
import { parseSnapshotName, type SnapshotRef } from '../format/snapshot-name.js';
import { METADATA_ENCRYPTION_KEY_ID } from './metadata.js';
import { ObjectNotFoundError, type SnapStore } from './snapstore.js';

/** Heads read at once while looking for the first encrypted snapshot. */
const CONCURRENCY = 8;

/**
 * Whether a plain snapshot, read with a key file, may be used (docs/encryption.md §1, "Plain snapshots"). A store
 * is plain until encryption is turned on and encrypted after, so plain snapshots older than its first encrypted one
 * (written before, or by ebr) are read as ever. A plain snapshot newer than that one, by revision or by the time
 * its name gives, is what whoever can write to the bucket would put in place of an encrypted snapshot (its sha256
 * trailer needs no key): it is refused as damage, so a restore passes over it as over any damaged object.
 *
 * The first encrypted snapshot is found once, oldest first, from the key id each one's metadata records or else
 * from its first bytes; a store whose plain snapshots all come first costs a read of each of those, once.
 */
export class PlainSubstitutes {
  private first?: Promise<{ byRevision?: SnapshotRef; byTime?: SnapshotRef }>;
  private readonly heads = new Map<string, Promise<boolean>>();

  constructor(private readonly store: SnapStore) {}

  /** Throws an IntegrityError naming `label` when the plain snapshot `name` is newer than an encrypted one. */
  async check(name: string, label: string): Promise<void> {
    const ref = parseSnapshotName(name);
    if (!ref) return;
    // A store that failed to answer is asked again next time.
    this.first ??= this.findFirstEncrypted().catch((err: unknown) => {
      this.first = undefined;
      throw err;
    });
    const { byRevision, byTime } = await this.first;
    const older =
      byRevision && byRevision.lastRevision < ref.lastRevision
        ? byRevision
        : byTime && byTime.createdAt < ref.createdAt
          ? byTime
          : undefined;
    if (older) {
      throw new IntegrityError(
        `${label} is not encrypted, but the store holds an encrypted snapshot from before it (${older.name}): a plain snapshot newer than the first encrypted one is taken for a substitute and not used; delete it if nobody meant to write it plain (docs/encryption.md §1)`,
      );
    }
  }

  private async findFirstEncrypted(): Promise<{ byRevision?: SnapshotRef; byTime?: SnapshotRef }> {
    const objects = [...(await this.store.list('v2/')), ...(await this.store.list('v1/'))];
    const snapshots = objects.flatMap((o) => {
      const ref = parseSnapshotName(o.name);
      return ref ? [{ ref, keyId: o.metadata[METADATA_ENCRYPTION_KEY_ID] }] : [];
    });
    const byRevision = [...snapshots].sort(
      (a, b) => a.ref.lastRevision - b.ref.lastRevision || a.ref.createdAt - b.ref.createdAt,
    );
    const byTime = [...snapshots].sort(
      (a, b) => a.ref.createdAt - b.ref.createdAt || a.ref.lastRevision - b.ref.lastRevision,
    );
    return { byRevision: await this.firstEncrypted(byRevision), byTime: await this.firstEncrypted(byTime) };
  }

  private async firstEncrypted(ordered: Array<{ ref: SnapshotRef; keyId?: string }>): Promise<SnapshotRef | undefined> {
    for (let i = 0; i < ordered.length; i += CONCURRENCY) {
      const batch = ordered.slice(i, i + CONCURRENCY);
      const encrypted = await Promise.all(batch.map((s) => s.keyId !== undefined || this.encrypted(s.ref.name)));
      const at = encrypted.indexOf(true);
      if (at >= 0) return batch[at].ref;
    }
    return undefined;
  }

  private encrypted(name: string): Promise<boolean> {
    let known = this.heads.get(name);
    if (!known) {
      known = this.store
        .get(name)
        .then(readHead)
        .then(isEncrypted, (err: unknown) => {
          // gone since the listing: it cannot be an older encrypted snapshot any more
          if (err instanceof ObjectNotFoundError) return false;
          this.heads.delete(name);
          throw err;
        });
      this.heads.set(name, known);
    }
    return known;
  }
}

/** An object's first `bytes` bytes (as many as the magic unless given; fewer when it is shorter), the rest left unread. */
export async function readHead(body: Readable, bytes = ENCRYPTION_MAGIC.length): Promise<Buffer> {
  const pieces: Buffer[] = [];
  let length = 0;
  try {
    for await (const piece of body as AsyncIterable<Buffer>) {
      pieces.push(piece);
      length += piece.length;
      if (length >= bytes) break;
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(pieces);
}
