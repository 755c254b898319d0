import { open } from 'node:fs/promises';

/** Files and directories alike: a rename is durable only once the directory it renamed into is synced too. */
export async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
