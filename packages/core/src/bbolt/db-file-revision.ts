import { closeSync, openSync } from 'node:fs';
import { IntegrityError } from '../common/errors.js';
import { BboltReader, type LeafElement } from './bbolt-file.js';
import { mainRevision } from './revision-key.js';

/**
 * The store revision of an etcd bbolt file (e.g. a restored `member/snap/db`), as etcd computes it at
 * start-up: the main revision of the last row in the `key` bucket (1 when empty), raised to the compaction
 * marks in `meta`. Read down the rightmost path of the tree: a few pages, whatever the file's size.
 */
export async function dbFileRevision(path: string): Promise<number> {
  const fd = openSync(path, 'r');
  try {
    return storeRevision(new BboltReader(fd));
  } finally {
    closeSync(fd);
  }
}

export function storeRevision(reader: BboltReader): number {
  const buckets = reader.buckets();
  const key = buckets.get('key');
  if (!key) throw new IntegrityError('the db has no "key" bucket: it is not an etcd database');
  const last = reader.lastElement(key);
  let revision = last ? mainRevision(last.key) : 1;
  const meta = buckets.get('meta');
  if (meta) for (const mark of compactionMarks(reader.elements(meta))) revision = Math.max(revision, mark);
  return revision;
}

/** The compaction marks among the `meta` bucket's elements (etcd's finished and scheduled compact revisions). */
export function compactionMarks(elements: Iterable<LeafElement>): number[] {
  const marks: number[] = [];
  for (const e of elements) {
    const name = e.key.toString('latin1');
    if ((name === 'finishedCompactRev' || name === 'scheduledCompactRev') && e.value.length === 17) {
      marks.push(Number(e.value.readBigUInt64BE(0)));
    }
  }
  return marks;
}
