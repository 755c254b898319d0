import { createHash, type Hash, hash } from 'node:crypto';
import type { Etcd3, IKeyValue } from 'etcd3';

/** A digest of a whole keyspace at one revision: equal fingerprints mean equal keys, values and histories. */
export interface KeyspaceFingerprint {
  revision: number;
  keys: number;
  sha256: string;
}

const PAGE = 1000;

/** One key as the fingerprint sees it: etcd's mvccpb.KeyValue, its numbers as decimal text. */
export interface FingerprintedKey {
  key: Buffer;
  value: Buffer;
  createRevision: number | string;
  modRevision: number | string;
  version: number | string;
}

/** The length of a key's digest (sha256). */
export const KEY_DIGEST_BYTES = 32;

/** Where a key's fields are laid out for its digest; grows to the largest key seen. */
let fields = Buffer.allocUnsafe(64 << 10);

/**
 * One key's own digest, written into `target` at `offset`: sha256 over its fields, each length-prefixed, so that
 * no two keys hash alike by shifting bytes between fields. The fields are laid out in one buffer and hashed in one
 * call, which leaves nothing behind but a short string, where a Hash object and ten updates per key left native
 * memory the JS heap does not count (~4 MB more at the end of 107,528 keys).
 */
export function writeKeyDigest(kv: FingerprintedKey, target: Buffer, offset: number): void {
  const numbers = `${String(kv.createRevision).length}:${kv.createRevision}${String(kv.modRevision).length}:${kv.modRevision}${String(kv.version).length}:${kv.version}`;
  const needed = kv.key.length + kv.value.length + numbers.length + 24;
  if (needed > fields.length) fields = Buffer.allocUnsafe(needed);
  let at = fields.write(`${kv.key.length}:`, 0, 'latin1');
  at += kv.key.copy(fields, at);
  at += fields.write(`${kv.value.length}:`, at, 'latin1');
  at += kv.value.copy(fields, at);
  at += fields.write(numbers, at, 'latin1');
  target.write(hash('sha256', fields.subarray(0, at), 'hex'), offset, 'hex');
}

/**
 * The fingerprint's digest: sha256 over each key's digest (writeKeyDigest), fed in key order. Whoever reads the
 * keyspace (etcd over gRPC, or a db file directly) feeds it here, so both give the same fingerprint. A digest per
 * key lets a db file's reader take the keys in the file's order, which is not key order, and feed their digests in
 * key order after (validation/live-row-digests.ts).
 */
export class FingerprintHash {
  private readonly hash: Hash = createHash('sha256');
  private readonly one = Buffer.alloc(KEY_DIGEST_BYTES);
  keys = 0;

  add(kv: FingerprintedKey): void {
    writeKeyDigest(kv, this.one, 0);
    this.addDigests(this.one);
  }

  /** The digests of the next keys in key order, one after another. */
  addDigests(digests: Buffer): void {
    this.hash.update(digests);
    this.keys += digests.length / KEY_DIGEST_BYTES;
  }

  digest(revision: number): KeyspaceFingerprint {
    return { revision, keys: this.keys, sha256: this.hash.digest('hex') };
  }
}

/**
 * sha256 over the digests of every key in key order, each over the key, its value, create and mod revision and
 * version, read at one revision in pages (a single range over a large keyspace would pass gRPC's message limit).
 */
export async function keyspaceFingerprint(client: Etcd3, atRevision?: number): Promise<KeyspaceFingerprint> {
  const hash = new FingerprintHash();
  let revision = atRevision ?? 0;
  for await (const page of keyspacePages(client, atRevision)) {
    revision = page.revision;
    for (const kv of page.kvs) {
      hash.add({
        key: kv.key,
        value: kv.value,
        createRevision: kv.create_revision,
        modRevision: kv.mod_revision,
        version: kv.version,
      });
    }
  }
  return hash.digest(revision);
}

/** The keyspace at `atRevision` (default: now) in key order, a page at a time, with the revision it was read at. */
export async function* keyspacePages(
  client: Etcd3,
  atRevision?: number,
): AsyncGenerator<{ revision: number; kvs: IKeyValue[] }> {
  let revision = atRevision ?? 0;
  let from: Buffer = Buffer.from([0]);
  for (;;) {
    const res = await client.kv.range({ key: from, range_end: Buffer.from([0]), revision, limit: PAGE });
    if (revision === 0) revision = Number(res.header.revision);
    yield { revision, kvs: res.kvs };
    if (!res.more || res.kvs.length === 0) return;
    from = Buffer.concat([res.kvs[res.kvs.length - 1].key, Buffer.from([0])]);
  }
}
