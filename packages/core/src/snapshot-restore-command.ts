import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { OperationError } from './errors.js';
import type { EtcdBinaries } from './etcd-binaries.js';
import { briefGoProgramEnv } from './go-memory.js';

const run = promisify(execFile);

/** The membership a restored data dir is made for: the usual etcd member flags. */
export interface MemberConfig {
  name: string;
  initialCluster: string;
  initialClusterToken: string;
  initialAdvertisePeerUrls: string;
}

/**
 * Turns a verified snapshot file into a data dir with etcd's own tool: `etcdutl snapshot restore`
 * (3.5+) or `etcdctl snapshot restore` (3.4). Both refuse an existing or non-empty target.
 */
export async function runSnapshotRestore(
  binaries: EtcdBinaries,
  snapshotFile: string,
  dataDir: string,
  member: MemberConfig,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  const tool = binaries.etcdutl ?? binaries.etcdctl;
  if (!tool) throw new OperationError('neither etcdutl nor etcdctl is available to restore the snapshot');
  const args = [
    'snapshot',
    'restore',
    snapshotFile,
    `--data-dir=${dataDir}`,
    `--name=${member.name}`,
    `--initial-cluster=${member.initialCluster}`,
    `--initial-cluster-token=${member.initialClusterToken}`,
    `--initial-advertise-peer-urls=${member.initialAdvertisePeerUrls}`,
  ];
  try {
    await run(tool, args, {
      env: { ...briefGoProgramEnv(), ETCDCTL_API: '3' },
      maxBuffer: 16 << 20,
      signal: options.signal,
    });
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '')
      .trim()
      .split('\n')
      .at(-1);
    throw new OperationError(`${tool} snapshot restore failed: ${stderr || (err as Error).message}`, { cause: err });
  }
}

/** Members named in `--initial-cluster` (name=url,...). */
export function clusterMembers(initialCluster: string): Array<{ name: string; url: string }> {
  return initialCluster
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      return { name: pair.slice(0, at), url: pair.slice(at + 1) };
    });
}
