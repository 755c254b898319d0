import { createHash } from 'node:crypto';
import type { Etcd3 } from 'etcd3';

/** A digest of a whole keyspace at one revision: equal fingerprints mean equal keys, values and histories. */
export interface KeyspaceFingerprint {
  revision: number;
  keys: number;
  sha256: string;
}

const PAGE = 1000;

/**
 * sha256 over every key in key order with its value, create and mod revision and version, read at one
 * revision in pages (a single range over a large keyspace would pass gRPC's message limit).
 */
export async function keyspaceFingerprint(client: Etcd3, atRevision?: number): Promise<KeyspaceFingerprint> {
  const hash = createHash('sha256');
  let revision = atRevision ?? 0;
  let from: Buffer = Buffer.from([0]);
  let keys = 0;
  for (;;) {
    const res = await client.kv.range({ key: from, range_end: Buffer.from([0]), revision, limit: PAGE });
    if (revision === 0) revision = Number(res.header.revision);
    for (const kv of res.kvs) {
      for (const field of [kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version]) {
        const bytes = Buffer.isBuffer(field) ? field : Buffer.from(String(field));
        hash.update(`${bytes.length}:`).update(bytes);
      }
      keys++;
    }
    if (!res.more || res.kvs.length === 0) break;
    from = Buffer.concat([res.kvs[res.kvs.length - 1].key, Buffer.from([0])]);
  }
  return { revision, keys, sha256: hash.digest('hex') };
}
