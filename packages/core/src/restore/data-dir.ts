import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { UsageError } from '../common/errors.js';
import { fsyncPath } from '../common/fsync-path.js';
import { killRecordedChildren } from '../etcd/orphan-processes.js';

/**
 * The target data dir and its scratch siblings. Work happens in `<data-dir>.restoring` beside the target,
 * on the same file system, so the finished dir moves into place with one rename; a crash before that
 * leaves the target as it was, and the next run clears the scratch dir.
 */
export class DataDirTarget {
  readonly path: string;
  readonly workDir: string;
  private readonly oldDir: string;

  constructor(dataDir: string) {
    this.path = resolve(dataDir);
    this.workDir = join(dirname(this.path), `.${basename(this.path)}.restoring`);
    this.oldDir = join(dirname(this.path), `.${basename(this.path)}.replaced`);
  }

  /**
   * Refuses a non-empty target unless `force`; said before any work starts. Creates the parent dir (so that a
   * path that can never be one is refused now), unless `create` is false (a dry run).
   */
  async check(force: boolean, options: { create?: boolean } = {}): Promise<void> {
    const entries = await readdir(this.path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      if (err.code === 'ENOTDIR') throw new UsageError(`--data-dir ${this.path} is a file, not a directory`);
      throw err;
    });
    if (entries.length > 0 && !force) {
      throw new UsageError(
        `--data-dir ${this.path} is not empty: pass --force to replace it, or choose another directory`,
      );
    }
    if (options.create === false) return;
    try {
      await mkdir(dirname(this.path), { recursive: true });
    } catch (err) {
      throw new UsageError(`cannot create the parent of --data-dir ${this.path}: ${(err as Error).message}`);
    }
  }

  /** A clean scratch dir: what a crashed earlier run left (files, and etcd processes still running there) is removed. */
  async prepare(): Promise<string> {
    await killRecordedChildren(this.workDir);
    await rm(this.workDir, { recursive: true, force: true });
    await mkdir(this.workDir, { recursive: true, mode: 0o700 });
    return this.workDir;
  }

  /**
   * Moves the finished data dir into place: the old target is renamed away first and removed last, once the
   * parent dir is synced (a rename survives a power loss only then; the old data must not go before it does).
   */
  async swapIn(finished: string): Promise<void> {
    await rm(this.oldDir, { recursive: true, force: true });
    const exists = await stat(this.path).then(
      () => true,
      () => false,
    );
    if (exists) await rename(this.path, this.oldDir);
    await rename(finished, this.path);
    await fsyncPath(dirname(this.path));
    await rm(this.oldDir, { recursive: true, force: true });
  }

  async cleanup(): Promise<void> {
    await rm(this.workDir, { recursive: true, force: true });
  }
}
