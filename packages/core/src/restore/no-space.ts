import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import { METADATA_DB_SIZE } from '../backup/take-full-snapshot.js';
import { OperationError } from '../common/errors.js';
import { formatBytes } from '../common/format-bytes.js';
import { recordedFullSize } from '../format/decompressed-limit.js';

/**
 * A restore that ran out of space (ENOSPC), said so that it can be acted on: the folder whose file system is full
 * (the restore works in `.<data dir>.restoring` beside `--data-dir`), the space it needs there (about twice the db:
 * the db laid out, and the full snapshot and the deltas fetched beside it), and what is free there now that its
 * scratch folder is gone. The db size is the one recorded with the full snapshot; without one (ebr's), at least
 * its stored size.
 */
export async function noSpaceError(
  dataDir: string,
  full: CatalogEntry | undefined,
  cause: unknown,
): Promise<OperationError> {
  const where = dirname(dataDir);
  const db = full && recordedFullSize(full.size, full.metadata[METADATA_DB_SIZE]);
  const needed = db
    ? `about ${formatBytes(2 * db)} there (twice the db of ${formatBytes(db)})`
    : full
      ? `more than ${formatBytes(2 * full.size)} there (twice the db, which is larger than its stored ${formatBytes(full.size)})`
      : 'about twice the db there';
  const free = await statfs(where).then(
    (s) => `; ${formatBytes(Number(s.bavail) * Number(s.bsize))} is free`,
    () => '',
  );
  return new OperationError(
    `no space left on the device of ${where} (ENOSPC), where the restore works beside --data-dir: it needs ${needed}${free}. Free space there, or restore into a larger volume; the target was left as it was`,
    { cause },
  );
}
