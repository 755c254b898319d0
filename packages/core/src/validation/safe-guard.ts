import { readFile, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { writeFileAtomically } from '../common/atomic-file.js';
import { UsageError } from '../common/errors.js';

export type SafeGuard =
  | { status: 'no-namespace' }
  | { status: 'created' | 'matches' | 'missing'; path: string }
  | { status: 'mismatch'; path: string; found: string };

/**
 * ebr's guard against a volume from another cluster: a file `safe_guard` beside the data dir (in the folder
 * the volume is mounted at) holding the namespace of the pod that first used it, exactly, with no newline.
 * As ebr does: with POD_NAMESPACE set, a missing file is written (mode 0600) and an existing one must match;
 * without it the check is skipped, so ebr and this program read and write the same file. `readOnly` (a dry
 * run) reports a missing file instead of writing it.
 */
export async function checkSafeGuard(
  dataDir: string,
  namespace: string | undefined,
  { readOnly = false } = {},
): Promise<SafeGuard> {
  if (!namespace) return { status: 'no-namespace' };
  // Go's path.Dir: "/var/etcd/data" → "/var/etcd", but "/var/etcd/data/" → "/var/etcd/data".
  const mount = dataDir.endsWith('/') ? resolve(dataDir) : dirname(resolve(dataDir));
  const path = join(mount, 'safe_guard');
  let found: string;
  try {
    found = await readFile(path, 'latin1');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    if (!(await stat(mount).catch(() => undefined))?.isDirectory()) {
      throw new UsageError(`--data-dir ${dataDir}: ${mount} is not a folder; give the data dir on the etcd volume`);
    }
    if (readOnly) return { status: 'missing', path };
    await writeFileAtomically(path, namespace, { mode: 0o600 });
    return { status: 'created', path };
  }
  return found === namespace ? { status: 'matches', path } : { status: 'mismatch', path, found };
}
