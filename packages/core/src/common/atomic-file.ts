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
  const temp = join(options.tempDir ?? dirname(path), `.${randomBytes(8).toString('hex')}.tmp`);
  await mkdir(dirname(path), { recursive: true });
  const handle = await open(temp, 'w', options.mode ?? 0o666);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, path);
}
