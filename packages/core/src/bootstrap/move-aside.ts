import { readdir, rename, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fsyncPath } from '../common/fsync-path.js';

/** Holds nothing: missing, or an empty folder. */
export async function isEmptyDir(path: string): Promise<boolean> {
  const entries = await readdir(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  return entries.length === 0;
}

/**
 * Renames a data dir that must not be used to `<data-dir>.bad-<UTC time>` beside it, on the same file system:
 * one rename, never a copy or a delete, so bad data stays there for a post-mortem until someone removes it.
 */
export async function moveAside(dataDir: string, now = new Date()): Promise<string> {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '');
  let aside = `${dataDir}.bad-${stamp}`;
  for (let n = 2; await exists(aside); n++) aside = `${dataDir}.bad-${stamp}-${n}`;
  await rename(dataDir, aside);
  await fsyncPath(dirname(dataDir));
  return aside;
}

/** Undoes moveAside when what was to replace the data failed: the next run decides again on the same data. */
export async function moveBack(aside: string, dataDir: string): Promise<void> {
  if (await exists(dataDir)) return;
  await rename(aside, dataDir);
  await fsyncPath(dirname(dataDir));
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
