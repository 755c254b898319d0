import { randomBytes } from 'node:crypto';
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';

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
