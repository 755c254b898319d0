import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/*
 * A program killed with SIGKILL cannot stop its child etcd, which then keeps running on a scratch dir
 * nobody will use again. Each child's pid is written into the scratch dir it works in, so that the next run
 * that clears that dir can stop what the crashed one left behind.
 */

const SUFFIX = '.pid';

export async function recordChildPid(dir: string, name: string, pid: number | undefined): Promise<void> {
  if (pid !== undefined) await writeFile(join(dir, `${name}${SUFFIX}`), String(pid));
}

/**
 * Kills the processes recorded in `dir` that are still running and still work there (their command line
 * names `dir`, so a pid reused by an unrelated process is left alone). Returns the pids it killed.
 */
export async function killRecordedChildren(dir: string): Promise<number[]> {
  const files = await readdir(dir).catch(() => [] as string[]);
  const killed: number[] = [];
  for (const file of files.filter((f) => f.endsWith(SUFFIX))) {
    const pid = Number((await readFile(join(dir, file), 'utf8').catch(() => '')).trim());
    if (!Number.isSafeInteger(pid) || pid <= 1) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(dir)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // already gone
    }
    await rm(join(dir, file), { force: true });
  }
  return killed;
}
