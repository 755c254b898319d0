import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { tempDir } from '../../../test/temp-dir.js';
import { DataDirTarget } from '../src/restore/data-dir.js';

/** What the file system was asked to do, in order: renames (by destination) and syncs (by path). */
const calls: string[] = [];

// A crash between a rename and its directory's sync cannot be staged in a test; the calls show the order.
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...fs,
    rename: async (from: string, to: string) => {
      calls.push(`rename ${to}`);
      return fs.rename(from, to);
    },
    open: async (path: string, flags?: string) => {
      const handle = await fs.open(path, flags);
      const sync = handle.sync.bind(handle);
      handle.sync = async () => {
        calls.push(`sync ${path}`);
        return sync();
      };
      return handle;
    },
  };
});

describe('DataDirTarget.swapIn', () => {
  const dir = tempDir('data-dir-');
  afterEach(() => {
    calls.length = 0;
  });

  it('syncs the parent dir after the renames that put the result in place, before the old data is removed', async () => {
    const target = new DataDirTarget(join(dir(), 'etcd'));
    await mkdir(target.path, { recursive: true });
    await writeFile(join(target.path, 'old'), 'old data');
    const finished = join(await target.prepare(), 'data');
    await mkdir(finished);
    await writeFile(join(finished, 'new'), 'restored');
    calls.length = 0;

    await target.swapIn(finished);

    expect(await readFile(join(target.path, 'new'), 'utf8')).toBe('restored');
    expect(calls.slice(-2)).toEqual([`rename ${target.path}`, `sync ${dirname(target.path)}`]);
    expect((await readdir(dirname(target.path))).sort()).toEqual(['.etcd.restoring', 'etcd']);
  });
});
