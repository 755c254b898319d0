import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dbEtcdVersion, newerThan, parseMinorVersion } from '../bbolt/db-etcd-version.js';
import { OperationError, UsageError } from '../common/errors.js';
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
 * (3.5+) or `etcdctl snapshot restore` (3.4). Both refuse an existing or non-empty target. `skipHashCheck`
 * for a db with no sha256 trailer (one not from etcd's snapshot stream).
 */
export async function runSnapshotRestore(
  binaries: EtcdBinaries,
  snapshotFile: string,
  dataDir: string,
  member: MemberConfig,
  options: { signal?: AbortSignal; skipHashCheck?: boolean } = {},
): Promise<void> {
  const tool = binaries.etcdutl ?? binaries.etcdctl;
  if (!tool) throw new OperationError('neither etcdutl nor etcdctl is available to restore the snapshot');
  refuseDowngrade(binaries, snapshotFile);
  const args = [
    'snapshot',
    'restore',
    snapshotFile,
    `--data-dir=${dataDir}`,
    `--name=${member.name}`,
    `--initial-cluster=${member.initialCluster}`,
    `--initial-cluster-token=${member.initialClusterToken}`,
    `--initial-advertise-peer-urls=${member.initialAdvertisePeerUrls}`,
    ...(options.skipHashCheck ? ['--skip-hash-check'] : []),
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

/**
 * etcd supports no move of data to an older minor version outside its own downgrade procedure: an etcd 3.4
 * started on a 3.5 db ignores what 3.5 added to it and its cluster version says 3.5. So a snapshot whose db
 * shows a newer etcd than the tools in use is refused before anything is laid out.
 */
export function refuseDowngrade(binaries: EtcdBinaries, snapshotFile: string): void {
  const tools = parseMinorVersion(binaries.version);
  const written = dbEtcdVersion(snapshotFile);
  if (!tools || !written || !newerThan(written, tools)) return;
  const wanted = `${written.major}.${written.minor}`;
  throw new UsageError(
    `the snapshot was taken from etcd ${wanted} and the etcd in use is ${binaries.version} (${binaries.etcd}): etcd cannot move data back to an older version. Put etcd ${wanted}'s etcd and etcdutl first on PATH, or name their folder with --etcd-bin-dir`,
  );
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
