// One measured run of etcd-restore (the process tree's time and memory, per phase from its log lines), and the
// restored keyspace's fingerprint, read by starting etcd on the result. restore.ts, compact.ts and run.ts use it.
import { join } from 'node:path';
import { freePort, type KeyspaceFingerprint } from '@etcd-steward/core';
import { fingerprintRestored } from '@etcd-steward/testing';
import { type Measurement, measure } from './measure.ts';

const root = new URL('../..', import.meta.url).pathname;

/** The restore's phases, from its JSON log lines (the replay process's lines come through it). */
export function restorePhase(line: string): string | undefined {
  const msg = /"msg":"([^"]*)"/.exec(line)?.[1];
  switch (msg) {
    case 'download':
      return 'download full snapshot';
    case 'laying out the member data dir':
      return 'lay out data dir (etcd tool)';
    case 'replay':
      return 'replay deltas';
    case 'verifying the result':
      return 'verify';
    case 'restored':
      return 'swap in';
    default:
      return undefined;
  }
}

export interface MeasuredRestore {
  run: Measurement;
  /** etcd-restore's JSON summary, when it succeeded. */
  result?: {
    revision: number;
    snapshot: string;
    deltas: unknown[];
    peakRssBytes: number;
    /** With --verify check: the keyspace fingerprint read from the db file. */
    fingerprint?: KeyspaceFingerprint;
  };
  /** The restored keyspace, when it succeeded. */
  fingerprint?: KeyspaceFingerprint;
}

/** etcd-restore of the store's newest state into `dataDir` (which must not exist), measured. */
export async function measureRestore(options: {
  storeDir: string;
  dataDir: string;
  replay?: string;
  /** --verify: check (the default) or etcd. */
  verify?: string;
  memoryLimitBytes?: number;
  /** The checkout whose built etcd-restore runs (default: this one). */
  root?: string;
  /**
   * false: the restored keyspace is the one the restore's verification read from the db file, not one read from an
   * etcd started on the result (which takes minutes on a db of GiBs).
   */
  startEtcd?: boolean;
}): Promise<MeasuredRestore> {
  const peerPort = await freePort();
  const peer = `http://127.0.0.1:${peerPort}`;
  const run = await measure(
    process.execPath,
    [
      join(options.root ?? root, 'packages/restore/bin/etcd-restore.js'),
      ...['--store', `file://${options.storeDir}`, '--data-dir', options.dataDir, '--name', 'bench'],
      ...['--initial-advertise-peer-urls', peer, '--initial-cluster-token', 'bench', '--output', 'json'],
      ...(options.replay ? ['--replay', options.replay] : []),
      ...(options.verify ? ['--verify', options.verify] : []),
    ],
    { phaseOf: restorePhase, memoryLimitBytes: options.memoryLimitBytes },
  );
  if (run.code !== 0) return { run };
  const result = JSON.parse(run.stdout) as MeasuredRestore['result'];
  if (options.startEtcd === false) return { run, result, fingerprint: result?.fingerprint };
  const [fingerprint] = await fingerprintRestored([{ name: 'bench', dataDir: options.dataDir, peerPort }], {
    initialCluster: `bench=${peer}`,
    clusterToken: 'bench',
  });
  return { run, result, fingerprint };
}

/** The last line of a failed run's log, for a table cell. */
export const failure = (run: Measurement): string =>
  `FAILED (${run.signal ?? `exit ${run.code}`}): ${run.stderr.trim().split('\n').at(-1)?.slice(0, 200)}`;
