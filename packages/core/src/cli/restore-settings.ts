import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { clusterMembers, type MemberConfig } from '../etcd/snapshot-restore-command.js';
import { parseRfc3339Nanos } from '../format/event-time.js';
import { DEFAULT_REPLAYED_LEASE_TTL } from '../replay/replay-events.js';
import type { ReplayMethod } from '../restore/replay-method.js';
import type { RestoreOptions } from '../restore/restore.js';
import type { VerifyMethod } from '../restore/result-verification.js';
import { flagGiven } from './flag-sources.js';

const PEER_URL = /^https?:\/\/[^/\s]+/;

/** The member flags etcd-restore and etcd-validate bootstrap share, as etcd names them. */
export function memberOptions<T>(y: Argv<T>) {
  return y
    .option('name', { type: 'string', default: 'default', describe: 'Member name, as etcd --name' })
    .option('initial-cluster', {
      type: 'string',
      describe: 'name=peerURL,... as etcd --initial-cluster (default: <name>=<initial-advertise-peer-urls>)',
    })
    .option('initial-cluster-token', {
      type: 'string',
      default: 'etcd-cluster',
      describe: 'As etcd --initial-cluster-token',
    })
    .option('initial-advertise-peer-urls', {
      type: 'string',
      default: 'http://localhost:2380',
      describe: "This member's peer URLs, as etcd --initial-advertise-peer-urls",
    });
}

/** The member flags as yargs parsed them. */
export interface MemberArgs {
  name: string;
  'initial-cluster'?: string;
  'initial-cluster-token': string;
  'initial-advertise-peer-urls': string;
}

/** The member flags checked together; a misuse is a UsageError (exit 2). */
export function memberSettings(args: MemberArgs): MemberConfig {
  const name = args.name;
  if (!name.trim()) throw new UsageError('--name is empty: give the member name, as etcd --name');
  const peerUrls = args['initial-advertise-peer-urls'];
  if (peerUrls.split(',').some((url) => !PEER_URL.test(url.trim()))) {
    throw new UsageError(
      `${flagGiven(args, 'initial-advertise-peer-urls', peerUrls)} must be http(s)://host:port[,...], as etcd takes it`,
    );
  }
  const initialCluster = args['initial-cluster'] ?? `${name}=${peerUrls}`;
  const members = clusterMembers(initialCluster);
  if (members.length === 0 || members.some((m) => !m.name || !PEER_URL.test(m.url))) {
    throw new UsageError(
      `${flagGiven(args, 'initial-cluster', initialCluster)} must be name=http(s)://host:port,... as etcd takes it`,
    );
  }
  if (!members.some((m) => m.name === name)) {
    throw new UsageError(`--initial-cluster does not name this member (--name ${name}): add ${name}=<its peer URL>`);
  }
  return {
    name,
    initialCluster,
    initialClusterToken: args['initial-cluster-token'],
    initialAdvertisePeerUrls: args['initial-advertise-peer-urls'],
  };
}

/** The command line as yargs parsed it (only what restore reads). */
export interface RestoreArgs extends MemberArgs {
  'data-dir': string;
  force: boolean;
  snapshot?: string;
  'to-revision'?: number;
  'to-time'?: string;
  'allow-partial': boolean;
  'max-fetchers': number;
  replay: ReplayMethod;
  verify?: VerifyMethod;
  'max-txn-ops': number;
  'max-request-bytes': number;
  'lease-ttl'?: number;
  'etcd-bin-dir'?: string;
}

/** Checks the flags together and turns them into restore options; every misuse is a UsageError (exit 2) before any work. */
export function restoreSettings(args: RestoreArgs): Omit<RestoreOptions, 'store' | 'logger' | 'signal'> {
  if (!args['data-dir'].trim()) throw new UsageError('--data-dir is empty: name the data dir to restore into');
  const toRevision = args['to-revision'];
  if (toRevision !== undefined && (!Number.isSafeInteger(toRevision) || toRevision < 1)) {
    throw new UsageError(`${flagGiven(args, 'to-revision', toRevision)} is not a revision: give a whole number ≥ 1`);
  }
  let toTime: Date | undefined;
  let toTimeNanos: bigint | undefined;
  if (args['to-time'] !== undefined) {
    if (toRevision !== undefined)
      throw new UsageError('--to-revision and --to-time both choose the point to restore: give one');
    toTimeNanos = parseRfc3339Nanos(args['to-time']);
    if (toTimeNanos === undefined) {
      throw new UsageError(`--to-time "${args['to-time']}" is not an RFC 3339 time; write e.g. 2026-11-21T22:15:00Z`);
    }
    toTime = new Date(Number(toTimeNanos / 1_000_000n));
  }
  const count = (flag: string, value: number, min: number, max: number) => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      throw new UsageError(`${flagGiven(args, flag, value)} must be a whole number from ${min} to ${max}`);
    }
    return value;
  };
  return {
    dataDir: args['data-dir'],
    force: args.force,
    snapshot: args.snapshot,
    toRevision,
    toTime,
    toTimeNanos,
    allowPartial: args['allow-partial'],
    maxFetchers: count('max-fetchers', args['max-fetchers'], 1, 64),
    replay: args.replay,
    verify: args.verify,
    limits: {
      maxTxnOps: count('max-txn-ops', args['max-txn-ops'], 1, 1 << 30),
      maxRequestBytes: count('max-request-bytes', args['max-request-bytes'], 1024, 2 ** 31 - 1),
    },
    leaseTtl: count('lease-ttl', args['lease-ttl'] ?? DEFAULT_REPLAYED_LEASE_TTL, 1, 9_000_000_000),
    member: memberSettings(args),
    etcdBinDir: args['etcd-bin-dir'],
  };
}
