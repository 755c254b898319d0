import { closeSync, fstatSync, openSync } from 'node:fs';
import { type BboltMeta, BboltReader, NO_FREELIST } from '../bbolt/bbolt-file.js';
import { storeRevision } from '../bbolt/db-file-revision.js';
import { IntegrityError } from '../common/errors.js';
import { checkBboltTree, type LeafVisitor } from './bbolt-tree-check.js';
import type { ValidationMode } from './verdict.js';

export interface DbState {
  meta: BboltMeta;
  /** The store revision etcd will start at (docs/etcd-formats.md §3.2). */
  revision: number;
  /** The raft index of the last entry applied to this db (docs/etcd-formats.md §3.3); 0 when absent. */
  consistentIndex: number;
  pagesWalked?: number;
  warnings: string[];
}

/**
 * The bbolt db read directly, without mapping it (docs/etcd-formats.md §2 and docs/etcd-formats.md §3). Sanity: both meta
 * pages, the file's length against the high-water mark, the `key` and `meta` buckets, the newest revision
 * down the `key` bucket's rightmost path and the consistent index: a few pages however large the db.
 * Full: also the whole page tree, each leaf given to `onLeaf`. A fault throws an IntegrityError that names it.
 */
export function checkDb(path: string, mode: ValidationMode, onLeaf?: LeafVisitor): DbState {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const reader = new BboltReader(fd);
    const { meta } = reader;
    const warnings = reader.invalidMetaPages.map(
      (page) =>
        `bbolt meta page ${page} is damaged; bbolt opens with meta page ${1 - page} (transaction ${meta.txid}), and etcd replays anything newer from its WAL`,
    );
    if (size < meta.pgid * meta.pageSize) {
      throw new IntegrityError(
        `the db is truncated: ${size} bytes, where its meta page counts ${meta.pgid} pages of ${meta.pageSize} bytes`,
      );
    }
    if (meta.root < 2 || meta.root >= meta.pgid)
      throw new IntegrityError(`the db's root page ${meta.root} is out of range`);
    if (meta.freelist !== NO_FREELIST && meta.freelist >= BigInt(meta.pgid)) {
      throw new IntegrityError(`the db's freelist page ${meta.freelist} is out of range`);
    }
    const buckets = reader.buckets();
    const metaBucket = buckets.get('meta');
    if (!buckets.has('key') || !metaBucket) {
      throw new IntegrityError('the db lacks etcd\'s "key" or "meta" bucket: it is not an etcd database');
    }
    const revision = storeRevision(reader);
    let consistentIndex = 0;
    for (const e of reader.elements(metaBucket)) {
      if (e.key.toString('latin1') !== 'consistent_index') continue;
      if (e.value.length !== 8) throw new IntegrityError(`the db's consistent_index is ${e.value.length} bytes, not 8`);
      consistentIndex = Number(e.value.readBigUInt64BE(0));
    }
    const pagesWalked = mode === 'full' ? checkBboltTree(reader, onLeaf) : undefined;
    return { meta, revision, consistentIndex, warnings, ...(pagesWalked === undefined ? {} : { pagesWalked }) };
  } finally {
    closeSync(fd);
  }
}
