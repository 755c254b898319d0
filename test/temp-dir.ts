import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

/**
 * A temporary folder for the tests of one file (or describe block), made before them and removed after them
 * whatever they did; the answer names a path inside it.
 */
export function tempDir(prefix: string): (...names: string[]) => string {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return (...names) => {
    if (!dir) throw new Error('tempDir: the folder exists only while the tests run');
    return join(dir, ...names);
  };
}
