import { METADATA_DB_SIZE, METADATA_ETCD_VERSION, METADATA_REVISION_DIGEST } from '@etcd-steward/core/backup';
import { METADATA_DECOMPRESSED_SIZE, METADATA_READ_BACK } from '@etcd-steward/core/format';
import { METADATA_SHA256 } from '@etcd-steward/core/store';
import { isSpooledFull, type SpooledDelta } from './spool.js';

/** The object metadata a spooled snapshot is stored with, wherever it goes (the chain, or forks/). */
export function spooledMetadata(entry: SpooledDelta): Record<string, string> {
  const metadata: Record<string, string> = { [METADATA_SHA256]: entry.sha256 };
  if (isSpooledFull(entry)) {
    if (entry.etcdVersion) metadata[METADATA_ETCD_VERSION] = entry.etcdVersion;
    if (entry.decompressedBytes) metadata[METADATA_DB_SIZE] = String(entry.decompressedBytes);
    if (entry.revisionDigest) metadata[METADATA_REVISION_DIGEST] = entry.revisionDigest;
  } else {
    if (entry.decompressedBytes) metadata[METADATA_DECOMPRESSED_SIZE] = String(entry.decompressedBytes);
    if (entry.readBack) metadata[METADATA_READ_BACK] = entry.readBack;
  }
  return metadata;
}
