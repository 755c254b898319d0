import { createHash } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OperationError } from '../common/errors.js';
import { killRecordedChildren } from '../etcd/orphan-processes.js';
import { DataDirTarget } from '../restore/data-dir.js';

/** The file naming the process that works in a scratch folder (not `.pid`: killRecordedChildren leaves it alone). */
const OWNER = 'owner';

/**
 * A compaction's scratch folder inside `--work-dir`: one per store, so that the next run for that store finds
 * what a killed one left (files, and the etcd processes still running there, stopped by their
 * recorded pids), and a run for another store sharing the work dir never touches it.
 */
export class CompactionScratch {
  readonly path: string;
  /** Where the chain is restored. */
  readonly dataDir: string;

  constructor(workDir: string, store: string) {
    this.path = join(workDir, `etcd-compact-${createHash('sha256').update(store).digest('hex').slice(0, 12)}`);
    this.dataDir = join(this.path, 'data');
  }

  /**
   * A clean folder owned by this process. A compaction of the same store still running in it is not
   * disturbed: that is an error (two at once would fold the same chain twice).
   */
  async prepare(): Promise<void> {
    const owner = Number(await readFile(join(this.path, OWNER), 'utf8').catch(() => ''));
    if (owner > 1 && owner !== process.pid && (await isCompaction(owner))) {
      throw new OperationError(
        `another etcd-compact (pid ${owner}) is compacting this store in ${this.path}: let it finish, or run one at a time (a CronJob with concurrencyPolicy: Forbid)`,
      );
    }
    await this.clear();
    await mkdir(this.path, { recursive: true, mode: 0o700 });
    await writeFile(join(this.path, OWNER), String(process.pid));
  }

  /** Stops what works in the folder (the restore's replay; with the etcd engine, the private etcd) and removes it. */
  async clear(): Promise<void> {
    for (const dir of [this.path, new DataDirTarget(this.dataDir).workDir]) await killRecordedChildren(dir);
    await rm(this.path, { recursive: true, force: true });
  }
}

async function isCompaction(pid: number): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.includes('etcd-compact');
}
