import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  checkLocalDir,
  checkLocalStore,
  type EtcdArgs,
  ebrRetentionOptions,
  etcdConnection,
  etcdOptions,
  flagGiven,
  type MemberArgs,
  memberOptions,
  memberSettings,
  type RetentionArgs,
  retentionPolicy,
  storeOption,
} from '@etcd-steward/core/cli';
import { parseByteSize, parseDuration, UsageError } from '@etcd-steward/core/common';
import { clusterMembers, type EtcdConnection, type MemberConfig } from '@etcd-steward/core/etcd';
import { COMPRESSION_POLICIES, type CompressionPolicy } from '@etcd-steward/core/format';
import { type PodIdentity, podIdentity } from '@etcd-steward/core/kubernetes';
import type { RetentionPolicy } from '@etcd-steward/core/retention';
import { parseStoreUrl } from '@etcd-steward/core/store';
import type { Argv } from 'yargs';
import { CronSchedule } from './cron-schedule.js';
import { FullSchedule } from './full-schedule.js';
import type { KubeClient } from './kube-client.js';
import { scratchDir } from './scratch-dir.js';

/** Everything `etcd-snapshot run` needs, checked: building it is where bad input stops the program (exit 2). */
export interface SidecarConfig {
  /** This sidecar's own etcd member: the first of --endpoints. */
  connection: EtcdConnection;
  storeUrl: string;
  /** Snapshots are encrypted with this file's first key, and read with any (docs/encryption.md). */
  encryptionKeyFile?: string;
  /** The prefix inside the bucket, as ebr's JSON shows it. */
  storePrefix: string;
  compression: CompressionPolicy;
  schedule: FullSchedule;
  /** 0: no delta snapshots. */
  deltaPeriodMs: number;
  memoryLimit: number;
  deltaUploadTimeoutMs: number;
  spoolDir: string;
  spoolMaxBytes: number;
  /** The sidecar's own folder inside --temp-dir, cleared at start and at stop (scratch-dir.ts). */
  tempDir: string;
  finalSnapshot: boolean;
  reelectionPeriodMs: number;
  /** A new leader waits this long before it writes: the old leader's last upload has ended by then. */
  handoverDelayMs: number;
  snapshotter: boolean;
  /** What /initialization/start checks and, if need be, restores; undefined without --data-dir. */
  initialization?: { dataDir: string; member: MemberConfig };
  /** A new leader aborts multipart uploads begun longer ago than this (what killed writers left). */
  incompleteUploadMaxAgeMs: number;
  /** Undefined unless --garbage-collection-period is more than 1s. */
  garbageCollection?: { periodMs: number; policy: RetentionPolicy };
  /** Undefined with --no-defragmentation. */
  defragmentation?: {
    schedule: CronSchedule;
    minReclaimBytes: number;
    timeoutMs: number;
    fullSnapshotAfter: boolean;
  };
  /** Undefined with --alarm-check-period 0. */
  alarms?: { periodMs: number; quotaBytes: number; threshold: number; defragTimeoutMs: number };
  /** Undefined unless a Kubernetes component is switched on (leases, EtcdMember status). */
  kubernetes?: {
    client: KubeClient;
    pod: PodIdentity;
    heartbeatMs: number;
    memberLease: boolean;
    snapshotLeases?: { full: string; delta: string };
    etcdMember: boolean;
  };
  /** Undefined with --no-server. */
  server?: {
    host: string;
    port: number;
    tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer };
    /** --server-token-file's token: every route but the open ones asks for it. */
    token?: Buffer;
    maxConnections: number;
    /** Requests a follower passes on to the leader's sidecar at once. */
    maxForwarded: number;
  };
}

/** etcd steps a leader down after an election timeout (1 s by default) without a quorum; a margin on top. */
const LEADER_STEP_DOWN_MS = 2_000;

export function sidecarOptions<T>(y: Argv<T>) {
  return memberOptions(ebrRetentionOptions(storeOption(etcdOptions(y)), { policyDefault: 'Exponential' }))
    .option('data-dir', {
      type: 'string',
      describe:
        "etcd's data dir, as ebr's --data-dir: /initialization/start checks it and, when it is bad, restores it from --store for the member the member flags describe (a single member). Without it, initialization answers Failed",
    })
    .option('garbage-collection-period', {
      type: 'string',
      default: '0',
      describe:
        "Delete the snapshots the policy no longer keeps this often, on the leader's sidecar (as etcd-gc does; docs/gc.md); 1s or less: never (ebr's default is 1m; here it is off unless asked for)",
    })
    .option('compression', {
      choices: COMPRESSION_POLICIES,
      default: 'zstd' as CompressionPolicy,
      describe: 'zstd is fastest; gzip, zlib and none are readable by etcd-backup-restore too',
    })
    .option('schedule', {
      alias: 's',
      type: 'string',
      default: '0 */1 * * *',
      describe: 'Cron schedule of full snapshots (5 fields, or 6 with seconds first), in local time',
    })
    .option('delta-snapshot-period', {
      type: 'string',
      default: '20s',
      describe: 'How often the watched changes are written as a delta snapshot; 0 switches deltas off',
    })
    .option('delta-snapshot-memory-limit', {
      type: 'string',
      default: '10485760',
      describe: 'Write a delta early once the watched changes reach this many bytes (e.g. 10Mi)',
    })
    .option('delta-upload-timeout', {
      type: 'string',
      default: '30s',
      describe: 'An upload of one delta gives up after this (it stays in the spool and is retried)',
    })
    .option('spool-dir', {
      type: 'string',
      default: '/var/lib/etcd-snapshot/spool',
      describe:
        'Local durable queue of deltas not yet in the store, and of the full snapshot that starts their chain when the store is down at start (use a volume that survives restarts)',
    })
    .option('spool-max-bytes', {
      type: 'string',
      default: '1Gi',
      describe: 'When the spool holds this much, the sidecar stops reading etcd until uploads make room',
    })
    .option('temp-dir', {
      type: 'string',
      describe:
        'Scratch space for full snapshots on their way to the store; the sidecar uses (and clears) only a folder of its own in it [default: <spool-dir>/tmp]',
    })
    .option('final-snapshot', {
      type: 'boolean',
      default: false,
      describe: 'Take a final full snapshot (named .final, as ebr) on SIGTERM',
    })
    .option('reelection-period', {
      type: 'string',
      default: '5s',
      describe: "How often to ask etcd whether this sidecar's member leads (only the leader's sidecar snapshots)",
    })
    .option('incomplete-upload-max-age', {
      type: 'string',
      default: '24h',
      describe:
        'On becoming leader, abort the multipart uploads (S3) begun longer ago than this: what killed writers left',
    })
    .option('defragmentation', {
      type: 'boolean',
      default: true,
      describe:
        "Defragment every member on --defragmentation-schedule, from the leader's sidecar, one member at a time (--no-defragmentation: never; docs/maintenance.md §3)",
    })
    .option('defragmentation-schedule', {
      type: 'string',
      default: '0 0 */3 * *',
      describe: 'Cron schedule of defragmentation (5 fields, or 6 with seconds first), in local time',
    })
    .option('defrag-min-reclaim', {
      type: 'string',
      default: '16Mi',
      describe: "Skip a member whose db has less than this to give back (etcd's dbSize minus dbSizeInUse)",
    })
    .option('etcd-defrag-timeout', {
      type: 'string',
      default: '8m',
      describe: "The longest one member's defragmentation may take; the run stops there and counts a failure",
    })
    .option('full-snapshot-after-defragmentation', {
      type: 'boolean',
      default: false,
      describe: 'Take a full snapshot after a defragmentation that defragmented a member',
    })
    .option('alarm-check-period', {
      type: 'string',
      default: '10s',
      describe:
        "How often to read etcd's alarms: NOSPACE is cleared (compact, defragment, disarm), CORRUPT stops snapshots from the member and fails /healthz; 0: never",
    })
    .option('alarm-quota-bytes', {
      type: 'string',
      default: '2Gi',
      describe: "etcd's --quota-backend-bytes: a NOSPACE alarm is disarmed only once every db is well under it",
    })
    .option('alarm-nospace-threshold', {
      type: 'number',
      default: 0.8,
      describe: 'The share of --alarm-quota-bytes every db must be under before a NOSPACE alarm is disarmed (0-1)',
    })
    .option('snapshotter', {
      type: 'boolean',
      default: true,
      describe: 'Take snapshots (--no-snapshotter: serve the HTTP API and metrics only)',
    })
    .option('enable-member-lease-renewal', {
      type: 'boolean',
      default: false,
      describe:
        "Renew the pod's Lease (named POD_NAME, in POD_NAMESPACE) every --k8s-heartbeat-duration, holder <memberID>:<clusterID>:Leader|Member (as ebr)",
    })
    .option('k8s-heartbeat-duration', {
      type: 'string',
      default: '30s',
      describe: 'How often the member lease and the EtcdMember status are renewed',
    })
    .option('enable-snapshot-lease-renewal', {
      type: 'boolean',
      default: false,
      describe:
        'After each snapshot, the full- or delta-snapshot Lease (in POD_NAMESPACE) holds its last revision (as ebr)',
    })
    .option('full-snapshot-lease-name', {
      type: 'string',
      default: 'full-snapshot-revisions',
      describe: 'Name of the full-snapshot Lease',
    })
    .option('delta-snapshot-lease-name', {
      type: 'string',
      default: 'delta-snapshot-revisions',
      describe: 'Name of the delta-snapshot Lease',
    })
    .option('etcd-member-resource', {
      type: 'boolean',
      default: false,
      describe:
        "Publish the member's status (IDs, role, revision, Ready condition) in druid's EtcdMember named POD_NAME, on change and every --k8s-heartbeat-duration",
    })
    .option('kubeconfig', {
      type: 'string',
      describe:
        "kubeconfig of the API server for leases and EtcdMember status [default: KUBECONFIG, ~/.kube/config or the pod's service account]",
    })
    .option('server', { type: 'boolean', default: true, describe: 'Serve the HTTP API (--no-server: none)' })
    .option('server-host', { type: 'string', default: '0.0.0.0', describe: 'Address the HTTP server binds' })
    .option('server-port', { type: 'number', default: 8080, describe: 'Port of the HTTP server' })
    .option('server-tls-cert', { type: 'string', describe: 'PEM certificate: serve HTTPS (with --server-tls-key)' })
    .option('server-tls-key', { type: 'string', describe: 'PEM private key of --server-tls-cert' })
    .option('server-tls-client-ca', {
      type: 'string',
      describe:
        'PEM CA: every endpoint but /healthz, /metrics and /snapshot/latest needs a client certificate it signed (with HTTPS)',
    })
    .option('server-token-file', {
      type: 'string',
      describe:
        'File holding a token: every endpoint but /healthz, /metrics and /snapshot/latest needs "Authorization: Bearer <token>"',
    })
    .option('server-max-connections', {
      type: 'number',
      default: 100,
      describe:
        'Connections served at once: past it a request gets 503 with Retry-After (/healthz excepted); past twice as many, connections are closed',
    })
    .option('server-max-forwarded', {
      type: 'number',
      default: 8,
      describe:
        "Snapshot requests a follower passes on to the leader's sidecar at once (each may wait for a full snapshot): past it, 503 with Retry-After",
    });
}

/** The parsed flags, as sidecarOptions declares them. */
export interface SidecarArgs extends EtcdArgs, MemberArgs, RetentionArgs {
  'garbage-collection-period': string;
  store: string;
  'encryption-key-file'?: string;
  'data-dir'?: string;
  compression: CompressionPolicy;
  schedule: string;
  'delta-snapshot-period': string;
  'delta-snapshot-memory-limit': string;
  'delta-upload-timeout': string;
  'spool-dir': string;
  'spool-max-bytes': string;
  'temp-dir'?: string;
  'final-snapshot': boolean;
  'reelection-period': string;
  'incomplete-upload-max-age': string;
  snapshotter: boolean;
  defragmentation: boolean;
  'defragmentation-schedule': string;
  'defrag-min-reclaim': string;
  'etcd-defrag-timeout': string;
  'full-snapshot-after-defragmentation': boolean;
  'alarm-check-period': string;
  'alarm-quota-bytes': string;
  'alarm-nospace-threshold': number;
  server: boolean;
  'server-host': string;
  'server-port': number;
  'server-tls-cert'?: string;
  'server-tls-key'?: string;
  'server-tls-client-ca'?: string;
  'server-token-file'?: string;
  'server-max-connections': number;
  'server-max-forwarded': number;
  'enable-member-lease-renewal': boolean;
  'k8s-heartbeat-duration': string;
  'enable-snapshot-lease-renewal': boolean;
  'full-snapshot-lease-name': string;
  'delta-snapshot-lease-name': string;
  'etcd-member-resource': boolean;
  kubeconfig?: string;
}

export async function sidecarConfig(args: SidecarArgs): Promise<SidecarConfig> {
  const all = await etcdConnection(args);
  const connection = { ...all, endpoints: [all.endpoints[0]] };
  const location = parseStoreUrl(args.store);
  const deltaUploadTimeoutMs = positive(
    parseDuration(args['delta-upload-timeout'], 'delta-upload-timeout'),
    'delta-upload-timeout',
  );
  const reelectionPeriodMs = positive(
    parseDuration(args['reelection-period'], 'reelection-period'),
    'reelection-period',
  );
  const deltaPeriodMs = parseDuration(args['delta-snapshot-period'], 'delta-snapshot-period');
  if (deltaPeriodMs > 0 && deltaPeriodMs < 1_000) {
    throw new UsageError('--delta-snapshot-period must be at least 1s (or 0 to switch delta snapshots off), as in ebr');
  }
  const spoolDir = args['spool-dir'];
  const tempDir = args['temp-dir'] ?? join(spoolDir, 'tmp');
  // Before the sidecar touches them (a mkdir under /proc never returns).
  await checkLocalStore(args.store);
  await checkLocalDir(spoolDir, '--spool-dir');
  await checkLocalDir(tempDir, '--temp-dir');
  return {
    connection,
    storeUrl: args.store,
    encryptionKeyFile: args['encryption-key-file'],
    storePrefix: location.prefix,
    compression: args.compression,
    schedule: new FullSchedule(args.schedule),
    deltaPeriodMs,
    memoryLimit: positive(
      parseByteSize(args['delta-snapshot-memory-limit'], 'delta-snapshot-memory-limit'),
      'delta-snapshot-memory-limit',
    ),
    deltaUploadTimeoutMs,
    spoolDir,
    spoolMaxBytes: positive(parseByteSize(args['spool-max-bytes'], 'spool-max-bytes'), 'spool-max-bytes'),
    tempDir: scratchDir(tempDir, spoolDir),
    finalSnapshot: args['final-snapshot'],
    reelectionPeriodMs,
    handoverDelayMs: deltaUploadTimeoutMs + reelectionPeriodMs + LEADER_STEP_DOWN_MS,
    snapshotter: args.snapshotter,
    initialization: await initializationConfig(args),
    incompleteUploadMaxAgeMs: parseDuration(args['incomplete-upload-max-age'], 'incomplete-upload-max-age'),
    garbageCollection: garbageCollectionConfig(args),
    defragmentation: defragmentationConfig(args),
    alarms: alarmsConfig(args),
    kubernetes: await kubernetesConfig(args),
    server: args.server ? await serverConfig(args) : undefined,
  };
}

async function initializationConfig(args: SidecarArgs): Promise<SidecarConfig['initialization']> {
  const dataDir = args['data-dir'];
  if (dataDir === undefined) return undefined;
  const member = memberSettings(args);
  if (clusterMembers(member.initialCluster).length > 1) {
    throw new UsageError(
      "--initial-cluster names several members: the sidecar's initialization restores a single member only; run etcd-validate bootstrap as the init container instead (it rejoins a cluster), and leave --data-dir off here",
    );
  }
  await checkLocalDir(dataDir, '--data-dir');
  return { dataDir, member };
}

/** ebr takes a period of 1s or less as "no garbage collection". */
function garbageCollectionConfig(args: SidecarArgs): SidecarConfig['garbageCollection'] {
  const periodMs = parseDuration(args['garbage-collection-period'], 'garbage-collection-period');
  if (periodMs <= 1_000) return undefined;
  const chunkMaxAgeMs = parseDuration(args['incomplete-upload-max-age'], 'incomplete-upload-max-age');
  return { periodMs, policy: retentionPolicy(args, { chunkMaxAgeMs }) };
}

function defragmentationConfig(args: SidecarArgs): SidecarConfig['defragmentation'] {
  const config = {
    schedule: new CronSchedule(args['defragmentation-schedule'], 'defragmentation-schedule'),
    minReclaimBytes: parseByteSize(args['defrag-min-reclaim'], 'defrag-min-reclaim'),
    timeoutMs: positive(parseDuration(args['etcd-defrag-timeout'], 'etcd-defrag-timeout'), 'etcd-defrag-timeout'),
    fullSnapshotAfter: args['full-snapshot-after-defragmentation'],
  };
  return args.defragmentation ? config : undefined;
}

function alarmsConfig(args: SidecarArgs): SidecarConfig['alarms'] {
  const periodMs = parseDuration(args['alarm-check-period'], 'alarm-check-period');
  const quotaBytes = positive(parseByteSize(args['alarm-quota-bytes'], 'alarm-quota-bytes'), 'alarm-quota-bytes');
  const threshold = args['alarm-nospace-threshold'];
  if (!(threshold > 0 && threshold < 1)) {
    throw new UsageError(
      `${flagGiven(args, 'alarm-nospace-threshold', threshold)} must be a share of the quota between 0 and 1, e.g. 0.8`,
    );
  }
  const defragTimeoutMs = parseDuration(args['etcd-defrag-timeout'], 'etcd-defrag-timeout');
  return periodMs > 0 ? { periodMs, quotaBytes, threshold, defragTimeoutMs } : undefined;
}

/** The client is loaded only when a Kubernetes component is on: it adds half a second to the start. */
async function kubernetesConfig(args: SidecarArgs): Promise<SidecarConfig['kubernetes']> {
  const memberLease = args['enable-member-lease-renewal'];
  const snapshotLeases = args['enable-snapshot-lease-renewal'];
  const etcdMember = args['etcd-member-resource'];
  const heartbeatMs = positive(
    parseDuration(args['k8s-heartbeat-duration'], 'k8s-heartbeat-duration'),
    'k8s-heartbeat-duration',
  );
  if (!memberLease && !snapshotLeases && !etcdMember) return undefined;
  if (snapshotLeases && !args.snapshotter) {
    throw new UsageError(
      '--enable-snapshot-lease-renewal follows the snapshots this sidecar takes: leave out --no-snapshotter, or the lease renewal',
    );
  }
  const names = { full: args['full-snapshot-lease-name'], delta: args['delta-snapshot-lease-name'] };
  if (snapshotLeases && (!names.full || !names.delta)) {
    throw new UsageError(
      '--full-snapshot-lease-name and --delta-snapshot-lease-name must not be empty with --enable-snapshot-lease-renewal',
    );
  }
  const flags = [
    memberLease && '--enable-member-lease-renewal',
    snapshotLeases && '--enable-snapshot-lease-renewal',
    etcdMember && '--etcd-member-resource',
  ].filter(Boolean);
  const pod = podIdentity(process.env, flags.join(' and '), memberLease || etcdMember);
  const { KubeClient } = await import('./kube-client.js');
  return {
    client: KubeClient.load(args.kubeconfig),
    pod,
    heartbeatMs,
    memberLease,
    snapshotLeases: snapshotLeases ? names : undefined,
    etcdMember,
  };
}

async function serverConfig(args: SidecarArgs): Promise<SidecarConfig['server']> {
  const port = args['server-port'];
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`${flagGiven(args, 'server-port', port)} is not a port number (0-65535)`);
  }
  const cert = args['server-tls-cert'];
  const key = args['server-tls-key'];
  if ((cert === undefined) !== (key === undefined)) {
    throw new UsageError('--server-tls-cert and --server-tls-key go together: give both for HTTPS, or neither');
  }
  const clientCa = args['server-tls-client-ca'];
  if (clientCa !== undefined && !cert) {
    throw new UsageError('--server-tls-client-ca needs HTTPS: give --server-tls-cert and --server-tls-key too');
  }
  const tls =
    cert && key
      ? {
          cert: await readPem(cert, '--server-tls-cert'),
          key: await readPem(key, '--server-tls-key'),
          clientCa: clientCa === undefined ? undefined : await readPem(clientCa, '--server-tls-client-ca'),
        }
      : undefined;
  const tokenFile = args['server-token-file'];
  for (const flag of ['server-max-connections', 'server-max-forwarded'] as const) {
    if (!Number.isInteger(args[flag]) || args[flag] < 1) {
      throw new UsageError(`${flagGiven(args, flag, args[flag])} must be a whole number of 1 or more`);
    }
  }
  return {
    host: args['server-host'],
    port,
    tls,
    token: tokenFile === undefined ? undefined : await readToken(tokenFile),
    maxConnections: args['server-max-connections'],
    maxForwarded: args['server-max-forwarded'],
  };
}

/** The token without the line end an editor or `echo` adds; an empty one would protect nothing. */
async function readToken(path: string): Promise<Buffer> {
  const token = (await readPem(path, '--server-token-file')).toString('utf8').trim();
  if (!token) throw new UsageError(`--server-token-file ${path} is empty: put the token in it`);
  if (/\s/.test(token)) {
    throw new UsageError(`--server-token-file ${path}: the token must be one word (no spaces or line breaks)`);
  }
  return Buffer.from(token);
}

function positive(value: number, flag: string): number {
  if (value <= 0) throw new UsageError(`--${flag} must be more than 0`);
  return value;
}

async function readPem(path: string, flag: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`${flag} ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
}
