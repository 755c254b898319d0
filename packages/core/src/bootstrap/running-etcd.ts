import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** A file of the data dir that a process holds a lock on, as /proc/locks shows it. */
export interface HeldFile {
  path: string;
  /** The holder's pid as this process sees it (-1 for a lock not owned by a process). */
  pid: number;
}

/**
 * Whether an etcd runs on this data dir: etcd holds a flock on `member/snap/db` (bbolt's, for as long as the db is
 * open) and on the WAL segments it writes (docs/etcd-formats.md §5.1). Read from /proc/locks, which lists the
 * locks of the processes this one can see: etcd in the same container, in a pod that shares its process
 * namespace, or on the same host. Undefined when none is held, or on a system without /proc/locks.
 */
export async function runningEtcdLock(dataDir: string): Promise<HeldFile | undefined> {
  const locks = await readFile('/proc/locks', 'utf8').catch(() => undefined);
  if (!locks) return undefined;
  const walDir = join(dataDir, 'member/wal');
  const walFiles = await readdir(walDir).catch(() => [] as string[]);
  const candidates = [
    join(dataDir, 'member/snap/db'),
    ...walFiles.filter((n) => n.endsWith('.wal')).map((n) => join(walDir, n)),
  ];
  const held = new Map<string, number>();
  for (const line of locks.split('\n')) {
    const fields = line.trim().split(/\s+/);
    // "1: FLOCK  ADVISORY  WRITE 1234 fe:01:56789 0 EOF"; a waiting request has "->" after the number
    if (fields[1] === '->') continue;
    const at = fields.findIndex((f) => /^[0-9a-f]+:[0-9a-f]+:\d+$/.test(f));
    if (at > 0) held.set(fields[at], Number(fields[at - 1]));
  }
  for (const path of candidates) {
    const st = await stat(path, { bigint: true }).catch(() => undefined);
    if (!st) continue;
    const pid = held.get(`${hex2(major(st.dev))}:${hex2(minor(st.dev))}:${st.ino}`);
    if (pid !== undefined) return { path, pid };
  }
  return undefined;
}

// The kernel prints a device as %02x:%02x; a stat's st_dev holds it in glibc's encoding.
const major = (dev: bigint) => ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
const minor = (dev: bigint) => (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
const hex2 = (n: bigint) => n.toString(16).padStart(2, '0');
