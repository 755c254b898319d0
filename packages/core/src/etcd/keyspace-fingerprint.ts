import { createHash, type Hash } from 'node:crypto';
import type { Etcd3 } from 'etcd3';

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

/**
 * One key's own digest: sha256 over its fields, each length-prefixed, so that no two keys hash alike by shifting
 * bytes between fields.
 */
export function keyDigest(kv: FingerprintedKey): Buffer {
  const hash = createHash('sha256');
  for (const field of [kv.key, kv.value, kv.createRevision, kv.modRevision, kv.version]) {
    const bytes = Buffer.isBuffer(field) ? field : Buffer.from(String(field));
    hash.update(`${bytes.length}:`).update(bytes);
  }
  return hash.digest();
}

/** The length of a key's digest (sha256). */
export const KEY_DIGEST_BYTES = 32;

/**
 * The fingerprint's digest: sha256 over each key's digest (keyDigest), fed in key order. Whoever reads the
 * keyspace (etcd over gRPC, or a db file directly) feeds it here, so both give the same fingerprint. A digest per
 * key lets a db file's reader take the keys in the file's order, which is not key order, and feed their digests in
 * key order after (validation/live-row-digests.ts).
 */
export class FingerprintHash {
  private readonly hash: Hash = createHash('sha256');
  keys = 0;

  add(kv: FingerprintedKey): void {
    this.addDigests(keyDigest(kv));
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
  let from: Buffer = Buffer.from([0]);
  for (;;) {
    const res = await client.kv.range({ key: from, range_end: Buffer.from([0]), revision, limit: PAGE });
    if (revision === 0) revision = Number(res.header.revision);
    for (const kv of res.kvs) {
      hash.add({
        key: kv.key,
        value: kv.value,
        createRevision: kv.create_revision,
        modRevision: kv.mod_revision,
        version: kv.version,
      });
    }
    if (!res.more || res.kvs.length === 0) break;
    from = Buffer.concat([res.kvs[res.kvs.length - 1].key, Buffer.from([0])]);
  }
  return hash.digest(revision);
}
