import { join } from 'node:path';
import { freePort, type KeyspaceFingerprint } from '@etcd-steward/core';
import { fingerprintRestored } from '@etcd-steward/testing';
import { expect } from 'vitest';
import { runProgram } from './run-program.js';

/** What etcd-restore --output json prints (the fields tests look at). */
export interface RestoreOutput {
  revision: number;
  snapshot: string;
  deltas: string[];
}

/** etcd-restore's arguments for one member, r0, restored from `store` into `dataDir`: its peer URL, the token, JSON. */
export function restoreArgs(store: string, dataDir: string, peerPort: number, token: string): string[] {
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    ...['--store', store, '--data-dir', dataDir, '--name', 'r0', '--initial-advertise-peer-urls', peer],
    ...['--initial-cluster-token', token, '--output', 'json'],
  ];
}

/**
 * etcd-restore into `<dir>/<name>` (extra flags after the store's), then the restored keyspace's fingerprint,
 * read from an etcd started on the result.
 */
export async function restoreAndFingerprint(
  storeUrl: string,
  dir: string,
  name: string,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<{ result: RestoreOutput; fingerprint: KeyspaceFingerprint }> {
  const peerPort = await freePort();
  const peer = `http://127.0.0.1:${peerPort}`;
  const dataDir = join(dir, name);
  const res = await runProgram('etcd-restore', [...restoreArgs(storeUrl, dataDir, peerPort, name), ...extra], env);
  expect(res.code, res.stderr).toBe(0);
  const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort }], {
    initialCluster: `r0=${peer}`,
    clusterToken: name,
  });
  return { result: JSON.parse(res.stdout), fingerprint };
}
