import { randomBytes } from 'node:crypto';
import { link, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Writes a small file so that readers see the old content or the whole new one, never a part: a durable temp
 * file in `tempDir` (on the target's file system), then one rename.
 */
export async function writeFileAtomically(
  path: string,
  content: string,
  options: { tempDir?: string; mode?: number } = {},
): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await rename(await writeDurableTemp(content, options.tempDir ?? dirname(path), options.mode), path);
}

/** A new file in `dir` holding `content`, synced to the disk: for a caller to rename into place. Returns its path. */
export async function writeDurableTemp(content: string, dir: string, mode = 0o666): Promise<string> {
  const temp = join(dir, `.${randomBytes(8).toString('hex')}.tmp`);
  const handle = await open(temp, 'w', mode);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return temp;
}

/**
 * Runs `fn` while holding the lock file `path` (its folder must exist): created exclusively, so one process at a
 * time holds it, on one machine or on a shared volume; others wait for it (1 ms, doubling to 50 ms). For short
 * critical sections only: a lock older than `staleMs` was left by a holder that was killed in it, and is broken.
 * Node has no flock, and a flock is not kept across the machines a shared volume may be mounted on.
 */
export async function withLockFile<T>(path: string, staleMs: number, fn: () => Promise<T>): Promise<T> {
  let mine: { ino: number; mtimeMs: number } | undefined;
  for (let wait = 1; !mine; wait = Math.min(wait * 2, 50)) {
    try {
      const handle = await open(path, 'wx');
      mine = await handle.stat().finally(() => handle.close());
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      await breakIfAbandoned(path, staleMs);
      await sleep(wait);
    }
  }
  try {
    return await fn();
  } finally {
    // Only its own: a holder that outlived staleMs may have seen its lock broken and taken by another.
    const now = await stat(path).catch(() => undefined);
    if (now && now.ino === mine.ino && now.mtimeMs === mine.mtimeMs) await rm(path, { force: true });
  }
}

/**
 * Removes a lock older than `staleMs`. By rename first, not unlink: of two waiters that both judged it abandoned,
 * the second would otherwise unlink the lock the first has just taken; a rename that moved a lock other than the
 * one judged puts it back.
 */
async function breakIfAbandoned(path: string, staleMs: number): Promise<void> {
  const judged = await stat(path).catch(() => undefined);
  if (!judged || Date.now() - judged.mtimeMs < staleMs) return;
  const aside = join(dirname(path), `${randomBytes(8).toString('hex')}.part`);
  const moved = await rename(path, aside).then(
    () => stat(aside).catch(() => undefined),
    () => undefined,
  );
  if (!moved) return;
  if (moved.ino !== judged.ino || moved.mtimeMs !== judged.mtimeMs) await link(aside, path).catch(() => undefined);
  await rm(aside, { force: true });
}
