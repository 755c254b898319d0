import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { findEtcdBinaries, freePort } from '@etcd-steward/core';

/**
 * What /proc/locks shows across namespaces, measured here: etcd's flock on member/snap/db is missing from another
 * PID namespace's /proc/locks, while the locks etcd takes on its WAL segments are listed (as pid -1): etcd takes
 * open-file-description locks there, which belong to no process, whenever its stdin accepts them (it tries on fd 0
 * at start-up; with fd 0 closed it falls back to flock, which goes missing too). So a test that wants only the db's
 * lock to tell starts etcd with `--wal-dir` outside the data dir.
 *
 * PID namespaces as a pod's containers have them, made with util-linux's unshare (root only). Since Linux 4.9
 * /proc/locks lists only the locks of processes in its own PID namespace, so a program started with this prefix
 * (a new PID namespace with its own /proc, in a mount namespace of its own: the host's /proc is untouched) does
 * not see, there, the locks of an etcd started by startEtcdInOwnPidNamespace, while flock still finds them held.
 * unshare blocks SIGTERM while it waits: stop such a program with SIGKILL, which --kill-child passes on to it.
 */
export const IN_OWN_PID_NAMESPACE = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child'];

/** Whether this machine lets tests make PID namespaces (root, or a user namespace allowed). */
export const canMakePidNamespaces =
  spawnSync(IN_OWN_PID_NAMESPACE[0], [...IN_OWN_PID_NAMESPACE.slice(1), 'true']).status === 0;

export interface NamespacedEtcd {
  endpoint: string;
  stop(): Promise<void>;
}

/** etcd on an existing data dir, in a PID namespace of its own (as druid's etcd container beside the sidecar). */
export async function startEtcdInOwnPidNamespace(
  dataDir: string,
  logFile: string,
  extraArgs: string[] = [],
): Promise<NamespacedEtcd> {
  const { etcd } = await findEtcdBinaries();
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child: ChildProcess = spawn(
    'unshare',
    [
      '--pid',
      '--fork',
      '--kill-child=SIGTERM',
      etcd,
      '--name=m0',
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=m0=${peer}`,
      ...extraArgs,
    ],
    // etcd reads ETCD_* variables as its flags (scripts/test's ETCD_VERSION would be --version), as spawned-etcd.ts
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_') || k === 'ETCD_UNSUPPORTED_ARCH'),
      ),
    },
  );
  const log = createWriteStream(logFile, { flags: 'a' });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve(void log.end())));
  // unshare blocks SIGTERM while it waits for its child: etcd (pid 1 of its namespace, which takes a signal it
  // handles from outside) is stopped by its own pid, unshare's child as this namespace sees it.
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const etcdPid = Number(
      (await readFile(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').catch(() => '')).trim().split(' ')[0],
    );
    if (etcdPid > 0) process.kill(etcdPid, 'SIGTERM');
    else child.kill('SIGKILL');
    await exited;
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}; see ${logFile}`);
    const healthy = await fetch(`${client}/health`)
      .then(async (r) => ((await r.json()) as { health?: string }).health === 'true')
      .catch(() => false);
    if (healthy) return { endpoint: client, stop };
    if (i > 300) {
      await stop();
      throw new Error(`etcd did not become healthy in its PID namespace; see ${logFile}`);
    }
    await sleep(100);
  }
}
