import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { UsageError } from '../common/errors.js';

const run = promisify(execFile);

/** The etcd programs restore, compact and validate run; `etcdutl` exists from 3.5 on. */
export interface EtcdBinaries {
  etcd: string;
  etcdctl?: string;
  etcdutl?: string;
  /** e.g. "3.4.23" */
  version: string;
  /** Whether `etcd` accepts `--unsafe-no-fsync` (3.5+), which a throwaway member can safely use. */
  supportsNoFsync: boolean;
}

async function findExecutable(name: string, binDir?: string): Promise<string | undefined> {
  const dirs = binDir ? [binDir] : (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

const cache = new Map<string, Promise<EtcdBinaries>>();

/** Finds etcd and its tools in `--etcd-bin-dir`, else on PATH. */
export function findEtcdBinaries(binDir?: string): Promise<EtcdBinaries> {
  const key = binDir ?? '';
  let found = cache.get(key);
  if (!found) {
    found = locate(binDir);
    cache.set(key, found);
    found.catch(() => cache.delete(key));
  }
  return found;
}

async function locate(binDir?: string): Promise<EtcdBinaries> {
  const where = binDir ? `in --etcd-bin-dir ${binDir}` : 'on PATH';
  const etcd = await findExecutable('etcd', binDir);
  if (!etcd)
    throw new UsageError(`no etcd binary ${where}: install etcd (e.g. Debian etcd-server) or set --etcd-bin-dir`);
  const [etcdctl, etcdutl] = await Promise.all([findExecutable('etcdctl', binDir), findExecutable('etcdutl', binDir)]);
  if (!etcdctl && !etcdutl) {
    throw new UsageError(`no etcdutl or etcdctl ${where}: install etcd's client tools (e.g. Debian etcd-client)`);
  }
  const { stdout } = await run(etcd, ['--version']);
  const version = /etcd Version:\s*(\S+)/.exec(stdout)?.[1] ?? 'unknown';
  const [major, minor] = version.split('.').map(Number);
  return { etcd, etcdctl, etcdutl, version, supportsNoFsync: major > 3 || (major === 3 && minor >= 5) };
}
