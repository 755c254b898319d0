import { closeSync, openSync } from 'node:fs';
import { commitBuckets, writeBucket } from './bbolt-commit.js';
import { type BboltMeta, type BucketValue, NO_FREELIST } from './bbolt-file.js';
import { PageAppender } from './bbolt-page-writer.js';

/** A new bbolt db file holding the named buckets, each empty (the file must not exist). */
export function writeEmptyDb(file: string, buckets: readonly string[], pageSize = 4096): void {
  const fd = openSync(file, 'wx', 0o600);
  try {
    // Pages 0 and 1 are the metas; the commit writes them last, as any other.
    const pages = new PageAppender(fd, pageSize, 2);
    const none: BboltMeta = { pageSize, root: 0, sequence: 0n, freelist: NO_FREELIST, pgid: 2, txid: 0n };
    const written = new Map<string, BucketValue>(buckets.map((name) => [name, writeBucket(pages, [], 0n)]));
    commitBuckets(fd, pages, none, written);
  } finally {
    closeSync(fd);
  }
}
