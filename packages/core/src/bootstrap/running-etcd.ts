import { spawn } from 'node:child_process';
import { type FileHandle, open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage, UsageError } from '../common/errors.js';

/** A file of the data dir that a process holds a lock on, as /proc/locks shows it. */
export interface HeldFile {
  path: string;
  /** The holder's pid as this process sees it (-1 for a lock not owned by a process). */
  pid: number;
}

/** bootstrap's own hold on `member/snap/db` while it judges and acts; release when done. */
export interface DataDirLock {
  release(): Promise<void>;
}

/** The exit code util-linux's flock is asked to give when another holds the lock (EX_TEMPFAIL). */
const CONFLICT = 75;

/**
 * Makes sure no etcd runs on this data dir, and keeps one from opening it until released: takes bbolt's lock on
 * `member/snap/db` (etcd holds an exclusive flock on it for as long as the db is open) without waiting, then looks
 * at /proc/locks for the WAL segments' locks too. Throws a UsageError (exit 2) naming the held file when either is held.
 *
 * The lock is what answers, /proc/locks only adds the holder's pid: since Linux 4.9 /proc/locks lists only the
 * locks of processes in the reader's PID namespace, so an etcd in another container of the pod (druid's etcd
 * runs beside the sidecar without a shared process namespace) is missing from it, while a flock on the same
 * file conflicts across namespaces. Node has no flock call: util-linux's `flock` takes it on a descriptor this
 * process opened and passes down (`flock --nonblock 3`). A flock belongs to the open file, not to the process
 * that asked, so once the helper exits the lock stays with this process's descriptor until release() closes it
 * (or this process ends): an etcd that starts meanwhile waits for it, as bbolt waits for a held lock. A few ms.
 */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  // Before the lock is taken: once it is, /proc/locks lists this process's own lock on the db too.
  const seen = await runningEtcdLock(dataDir);
  if (seen) throw runningEtcd(dataDir, seen);
  const db = join(dataDir, 'member/snap/db');
  const file = await open(db, 'r').catch((err: NodeJS.ErrnoException) => {
    // no db: no etcd has it open (etcd creates it before it serves)
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined;
    throw new UsageError(`cannot open ${db} to make sure no etcd runs on it: ${errorMessage(err)}`);
  });
  if (!file) return { release: async () => {} };
  try {
    if (!(await flockWithoutWaiting(file, db))) throw runningEtcd(dataDir, { path: db, pid: -1 });
  } catch (err) {
    await file.close();
    throw err;
  }
  return { release: () => file.close() };
}

function runningEtcd(dataDir: string, held: HeldFile): UsageError {
  return new UsageError(
    `etcd is running on ${dataDir}: ${held.path} is locked${held.pid > 0 ? ` by process ${held.pid}` : ' by a process this one cannot see (another container, or another PID namespace)'}. bootstrap runs before etcd starts (as its init container) and would move the data of a live member aside; stop that etcd first, or check a copy with etcd-validate check`,
  );
}

/** Takes an exclusive flock on `file` through util-linux's flock; false when another holds one. */
function flockWithoutWaiting(file: FileHandle, path: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const helper = spawn('flock', ['--nonblock', '--exclusive', '--conflict-exit-code', String(CONFLICT), '3'], {
      stdio: ['ignore', 'ignore', 'pipe', file.fd],
    });
    let stderr = '';
    helper.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    helper.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new UsageError(
          err.code === 'ENOENT'
            ? `cannot make sure no etcd runs on ${path}: util-linux's flock is not on PATH; install util-linux (the image has it)`
            : `cannot run flock to make sure no etcd runs on ${path}: ${errorMessage(err)}`,
        ),
      ),
    );
    helper.once('close', (code) => {
      if (code === 0) resolve(true);
      else if (code === CONFLICT) resolve(false);
      else
        reject(
          new UsageError(
            `cannot lock ${path} to make sure no etcd runs on it: flock ${stderr.trim() || `exited with ${code}`}`,
          ),
        );
    });
  });
}

/**
 * Who holds a lock on the data dir's db or WAL segments, as /proc/locks shows it: the locks of the processes this
 * one can see (etcd in the same container, in a pod that shares its process namespace, or on the same host).
 * Undefined when none is listed, or on a system without /proc/locks. lockDataDir is the check; this names the pid.
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
