import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * Where a pid names one process: this host, this boot of its kernel and this pid namespace (each container has
 * its own, where another process may have the same pid). Undefined where /proc does not tell.
 */
export function pidScope(): string | undefined {
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return `${hostname()}/${boot}/${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return undefined;
  }
}

/**
 * Whether process `pid` of `scope` is known to have ended: only a process of this process's own scope can be
 * asked. Anything else (another host or container, an unknown scope) is not known to have ended.
 */
export function processEnded(scope: string | undefined, pid: number | undefined): boolean {
  if (scope === undefined || scope !== pidScope() || pid === undefined || !Number.isSafeInteger(pid) || pid <= 0) {
    return false;
  }
  // our own pid: the holder was this process (another of its locks) or ended before it started; not sure which
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
