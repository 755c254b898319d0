import { realpath, stat, statfs } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { UsageError } from '../common/errors.js';
import { parseStoreUrl } from '../store/store-url.js';

/** File systems of the kernel's own making: they hold no files, and writing there can hang a process. */
const KERNEL_FILE_SYSTEMS = new Map([
  [0x9fa0, '/proc'],
  [0x62656572, '/sys'],
]);

/**
 * Checks a directory a program will create or write in, before it touches anything, with calls that never block
 * the main thread (a mkdir under /proc never returns, and signals wait for it): the nearest part that exists
 * must be a directory, on a real file system. With `mustExist`, the directory itself must be there.
 */
export async function checkLocalDir(path: string, flag: string, { mustExist = false } = {}): Promise<void> {
  const target = resolve(path);
  let existing = target;
  for (;;) {
    const found = await stat(existing).then(
      (s) => s,
      (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' || err.code === 'ENOTDIR' ? undefined : err),
    );
    if (found instanceof Error) return; // e.g. no permission: the work itself reports it in its own words
    if (found) {
      if (!found.isDirectory()) {
        const what = existing === target ? 'is not a directory' : `cannot be created: ${existing} is not a directory`;
        throw new UsageError(`${flag} ${path} ${what} (it is a file); give a directory's path`);
      }
      break;
    }
    if (existing === dirname(existing)) return;
    existing = dirname(existing);
  }
  if (mustExist && existing !== target) {
    throw new UsageError(`${flag} ${path} does not exist: create it, or give an existing directory`);
  }
  const real = await realpath(existing);
  const kernel =
    KERNEL_FILE_SYSTEMS.get((await statfs(existing)).type) ??
    ['/proc', '/sys'].find((root) => real === root || real.startsWith(`${root}/`));
  if (kernel) {
    throw new UsageError(`${flag} ${path} is under ${kernel}, which holds no files: give a directory on a disk`);
  }
}

/** A `file://` store's folder, checked as checkLocalDir does; other stores are not local. */
export async function checkLocalStore(store: string, flag = '--store'): Promise<void> {
  const location = parseStoreUrl(store, flag);
  if (location.scheme === 'file') await checkLocalDir(location.container, flag);
}
