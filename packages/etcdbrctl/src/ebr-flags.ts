// Over 350 lines: it is one table, an entry a flag; the logic that reads it is in translate.ts.
// The one table of ebr's command line: every flag etcd-backup-restore v0.23 to v0.43 defines, the subcommands
// that take it, ebr's default and what it does here. docs/moving-from-ebr.md is generated from it
// (node scripts/ebr-reference.ts).

/** ebr's subcommands, each run as one of our programs (commands.ts). */
export const EBR_COMMANDS = ['server', 'snapshot', 'restore', 'compact', 'initialize', 'copy'] as const;
export type EbrCommand = (typeof EBR_COMMANDS)[number];

/** How ebr (spf13/pflag) reads the value. */
export type FlagKind = 'bool' | 'string' | 'duration' | 'int' | 'list';

/** What a given flag becomes in our program's command line (and environment). */
export interface Translation {
  args: string[];
  env?: Record<string, string>;
}

export interface MappedFlag {
  /**
   * Turns ebr's value into ours; `command` is the ebr subcommand being run. A string instead says why the flag has
   * no effect in that command (it goes into the start-up log line).
   */
  map: (value: string, command: EbrCommand) => Translation | string;
  /** For the docs: what it becomes here. */
  here: string;
  /** ebr's default is passed on when the flag is not given (where our own default differs or may change). */
  applyDefault?: boolean;
}

/** Accepted and named once at start: the setting has no counterpart in this design, for the reason given. */
export interface IgnoredFlag {
  noEffect: string;
}

/** Refused with exit 2 before any work, with the reason and what to do instead. */
export interface RefusedFlag {
  refused: string;
}

/** Read by translate.ts itself (the store and its container variables, compression, the password). */
export interface SpecialFlag {
  special: string;
}

export interface EbrFlag {
  name: string;
  kind: FlagKind;
  commands: readonly EbrCommand[];
  /** ebr's default (v0.43 where it changed; `changed` says how). */
  ebrDefault: string;
  /** What the flag does in ebr, in a few words. */
  meaning: string;
  /** The ebr versions that have it, when not all of v0.23 to v0.43. */
  versions?: string;
  changed?: string;
  /** A one-letter name ebr also accepts (`-s`). */
  short?: string;
  effect: MappedFlag | IgnoredFlag | RefusedFlag | SpecialFlag;
}

const SIDECAR: readonly EbrCommand[] = ['server', 'snapshot'];
const ETCD_CLIENT: readonly EbrCommand[] = ['server', 'snapshot', 'initialize'];
const RESTORATION: readonly EbrCommand[] = ['server', 'restore', 'compact', 'initialize'];
const STORE: readonly EbrCommand[] = EBR_COMMANDS;

/** The same flag in our program. */
function same(name: string, options: { applyDefault?: boolean } = {}): MappedFlag {
  return renamed(name, options);
}

/** Our flag of another name. */
function renamed(ours: string, options: { applyDefault?: boolean } = {}): MappedFlag {
  return { map: (value) => ({ args: [`--${ours}=${value}`] }), here: `\`--${ours}\``, ...options };
}

function ignored(reason: string): IgnoredFlag {
  return { noEffect: reason };
}

const SNAPSHOT_STREAMS = 'a full snapshot streams for as long as etcd sends it';
const COMPACT_WORKS_IN_TEMP = 'compact works in `--snapstore-temp-directory`';
const COMPACT_NO_MEMBER = 'compact lays out no member';

const EMBEDDED_ETCD =
  'it configures the embedded etcd ebr starts to apply deltas; deltas are written into the db file here, with no etcd started';

/** ebr's spool of parts for multipart uploads has no counterpart: uploads stream. */
const STREAMED_UPLOADS = 'uploads stream from memory in parts (docs/stores.md); no part files are written first';

function storeFlags(prefix: '' | 'source-' | 'secondary-', commands: readonly EbrCommand[], versions?: string) {
  const whose =
    prefix === 'source-' ? "the copy's source" : prefix === 'secondary-' ? 'the secondary store' : 'the store';
  const secondary = prefix === 'secondary-';
  const noSecondary = ignored(
    'a secondary store is not kept in sync from the sidecar; run etcd-copy-backups as a Job (docs/copy-backups.md)',
  );
  const flags: EbrFlag[] = [
    {
      name: `${prefix}storage-provider`,
      kind: 'string',
      commands,
      ebrDefault: '""',
      meaning: `provider of ${whose}: Local, S3, GCS, ABS, Swift, OSS, ECS, OCS`,
      effect: secondary
        ? noSecondary
        : {
            special: `with the container and prefix, the \`--${prefix === 'source-' ? 'from' : 'store'}\` URL (an empty provider is Local, as in ebr)`,
          },
    },
    {
      name: `${prefix}store-container`,
      kind: 'string',
      commands,
      ebrDefault: `$${prefix === 'source-' ? 'SOURCE_' : secondary ? 'SECONDARY_' : ''}STORAGE_CONTAINER`,
      meaning: `bucket or container of ${whose} (Local: a folder under $HOME)`,
      effect: secondary
        ? noSecondary
        : {
            special: `part of the URL; when not given, \`${prefix === 'source-' ? 'SOURCE_' : ''}STORAGE_CONTAINER\` is read; Local: \`$HOME/<container>/<prefix>\`, \`default.bkp\` when empty`,
          },
    },
    {
      name: `${prefix}store-prefix`,
      kind: 'string',
      commands,
      ebrDefault: '""',
      meaning: `folder inside the container of ${whose} (ebr adds \`v2/\` below it itself)`,
      effect: secondary ? noSecondary : { special: 'part of the URL' },
    },
    {
      name: `${prefix}store-endpoint-override`,
      kind: 'string',
      commands,
      ebrDefault: '""',
      versions: 'v0.41+',
      meaning: `endpoint of ${whose}'s provider`,
      effect: secondary ? noSecondary : { special: 'S3: the URL option `endpoint`; refused for other providers' },
    },
    {
      name: `${prefix}max-parallel-chunk-uploads`,
      kind: 'int',
      commands,
      ebrDefault: '5',
      meaning: 'parts of a multipart upload sent at once',
      effect: ignored(STREAMED_UPLOADS),
    },
    {
      name: `${prefix}min-chunk-size`,
      kind: 'int',
      commands,
      ebrDefault: '5242880',
      meaning: 'smallest part of a multipart upload',
      effect: ignored(STREAMED_UPLOADS),
    },
    {
      name: `${prefix}snapstore-temp-directory`,
      kind: 'string',
      commands,
      ebrDefault: '/tmp',
      meaning: 'folder for temporary files (ebr creates it)',
      effect:
        prefix === ''
          ? {
              special:
                "compact: `--temp-dir`; server and snapshot: `--spool-dir=<dir>/etcd-steward-spool` (the sidecar's scratch space is in the spool); created when missing, as ebr",
            }
          : ignored('one scratch folder serves both stores: `--snapstore-temp-directory`'),
    },
  ];
  return flags.map((flag) => (versions ? { ...flag, versions } : flag));
}

export const EBR_FLAGS: readonly EbrFlag[] = [
  // etcd connection (server, snapshot, initialize)
  {
    name: 'endpoints',
    kind: 'list',
    short: 'e',
    commands: ETCD_CLIENT,
    ebrDefault: 'http://127.0.0.1:2379',
    meaning: 'etcd client URLs, comma-separated or repeated',
    // ebr's default is ours too; not passed on when not given, as initialize reads it as the other members.
    effect: { ...same('endpoints'), here: '`--endpoints` (initialize: the other members, for a rejoin)' },
  },
  {
    name: 'service-endpoints',
    kind: 'list',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: "the cluster's client Service, for calls meant for the whole cluster",
    effect: ignored(
      "the cluster's members are read from etcd's member list, and every member is reached through its own client URL",
    ),
  },
  {
    name: 'etcd-username',
    kind: 'string',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: 'etcd user (etcd auth)',
    effect: renamed('user'),
  },
  {
    name: 'etcd-password',
    kind: 'string',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: 'password of the etcd user',
    effect: { special: 'passed in `ETCD_STEWARD_PASSWORD`, never on a command line' },
  },
  {
    name: 'etcd-connection-timeout',
    kind: 'duration',
    commands: ETCD_CLIENT,
    ebrDefault: '30s',
    meaning: 'timeout of a call to etcd',
    effect: ignored('each call to etcd has a deadline of its own, and a sidecar waits for etcd instead of giving up'),
  },
  {
    name: 'etcd-snapshot-timeout',
    kind: 'duration',
    commands: [...ETCD_CLIENT, 'compact'],
    ebrDefault: '15m (compact: 30m)',
    meaning: 'longest a full snapshot may take',
    effect: {
      map: (value, command) =>
        command === 'compact' ? { args: [`--etcd-snapshot-timeout=${value}`] } : SNAPSHOT_STREAMS,
      here: `compact: \`--etcd-snapshot-timeout\`; elsewhere no effect: ${SNAPSHOT_STREAMS}`,
    },
  },
  {
    name: 'etcd-defrag-timeout',
    kind: 'duration',
    commands: [...ETCD_CLIENT, 'compact'],
    ebrDefault: '8m',
    meaning: 'longest a defragmentation may take',
    effect: {
      map: (value, command) =>
        command === 'initialize' ? 'initialize does not defragment' : { args: [`--etcd-defrag-timeout=${value}`] },
      here: '`--etcd-defrag-timeout` (initialize: no effect, it does not defragment)',
    },
  },
  {
    name: 'insecure-transport',
    kind: 'bool',
    commands: ETCD_CLIENT,
    ebrDefault: 'true',
    meaning: 'talk to etcd without TLS',
    effect: ignored('TLS follows the scheme of `--endpoints` (http:// or https://)'),
  },
  {
    name: 'insecure-skip-tls-verify',
    kind: 'bool',
    commands: ETCD_CLIENT,
    // ebr binds it to the same setting as --insecure-transport, whose default it shows.
    ebrDefault: 'true',
    meaning: "do not verify etcd's certificate",
    effect: ignored("etcd's certificate is always verified, against `--cacert` when given"),
  },
  {
    name: 'cert',
    kind: 'string',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: 'client certificate for etcd',
    effect: same('cert'),
  },
  {
    name: 'key',
    kind: 'string',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: 'client key for etcd',
    effect: same('key'),
  },
  {
    name: 'cacert',
    kind: 'string',
    commands: ETCD_CLIENT,
    ebrDefault: '""',
    meaning: "CA of etcd's certificate",
    effect: same('cacert'),
  },

  // the HTTP server (server)
  {
    name: 'server-port',
    kind: 'int',
    short: 'p',
    commands: ['server'],
    ebrDefault: '8080',
    meaning: 'port of the HTTP API',
    effect: same('server-port', { applyDefault: true }),
  },
  {
    name: 'enable-profiling',
    kind: 'bool',
    commands: ['server'],
    ebrDefault: 'false',
    meaning: "Go's pprof endpoints on the HTTP server",
    effect: ignored("there is no Go runtime to profile; Node's own profiler is started with NODE_OPTIONS=--cpu-prof"),
  },
  {
    name: 'server-cert',
    kind: 'string',
    commands: ['server'],
    ebrDefault: '""',
    meaning: 'TLS certificate of the HTTP API',
    effect: renamed('server-tls-cert'),
  },
  {
    name: 'server-key',
    kind: 'string',
    commands: ['server'],
    ebrDefault: '""',
    meaning: 'TLS key of the HTTP API',
    effect: renamed('server-tls-key'),
  },

  // the snapshotter (server, snapshot)
  {
    name: 'schedule',
    kind: 'string',
    short: 's',
    commands: SIDECAR,
    ebrDefault: '0 */1 * * *',
    meaning: 'cron schedule of full snapshots',
    effect: same('schedule', { applyDefault: true }),
  },
  {
    name: 'delta-snapshot-period',
    kind: 'duration',
    commands: SIDECAR,
    ebrDefault: '20s',
    meaning: 'how often a delta snapshot is written (below 1s: never)',
    effect: same('delta-snapshot-period', { applyDefault: true }),
  },
  {
    name: 'delta-snapshot-memory-limit',
    kind: 'int',
    commands: SIDECAR,
    ebrDefault: '10485760',
    meaning: 'bytes of watched changes that start a delta early',
    effect: same('delta-snapshot-memory-limit', { applyDefault: true }),
  },
  {
    name: 'garbage-collection-period',
    kind: 'duration',
    commands: SIDECAR,
    ebrDefault: '1m',
    meaning: 'how often old snapshots are deleted',
    effect: same('garbage-collection-period', { applyDefault: true }),
  },
  {
    name: 'garbage-collection-policy',
    kind: 'string',
    commands: SIDECAR,
    ebrDefault: 'Exponential',
    meaning: 'Exponential or LimitBased',
    effect: same('garbage-collection-policy', { applyDefault: true }),
  },
  {
    name: 'max-backups',
    kind: 'int',
    short: 'm',
    commands: SIDECAR,
    ebrDefault: '7',
    meaning: 'full snapshots LimitBased keeps',
    effect: same('max-backups', { applyDefault: true }),
  },
  {
    name: 'delta-snapshot-retention-period',
    kind: 'duration',
    commands: SIDECAR,
    ebrDefault: '0s',
    versions: 'v0.24.6+',
    meaning: 'how long deltas outside the newest chain are kept',
    effect: same('delta-snapshot-retention-period'),
  },
  {
    name: 'defragmentation-schedule',
    kind: 'string',
    commands: SIDECAR,
    ebrDefault: '0 0 */3 * *',
    meaning: 'cron schedule of defragmentation',
    effect: same('defragmentation-schedule', { applyDefault: true }),
  },

  // compression (server, snapshot)
  {
    name: 'compress-snapshots',
    kind: 'bool',
    commands: SIDECAR,
    ebrDefault: 'true',
    changed: 'false before v0.40',
    meaning: 'compress snapshots',
    effect: { special: 'with `--compression-policy`, our `--compression`: gzip, zlib, or none when false' },
  },
  {
    name: 'compression-policy',
    kind: 'string',
    commands: SIDECAR,
    ebrDefault: 'gzip',
    meaning: 'gzip, zlib or lzw',
    effect: { special: '`--compression` (gzip, zlib); lzw is refused: it is read here but not written' },
  },

  // exponential backoff of the snapshotter (server, snapshot)
  ...(['backoff-multiplier', 'backoff-attempt-limit', 'backoff-threshold-time'] as const).map(
    (name): EbrFlag => ({
      name,
      kind: name === 'backoff-threshold-time' ? 'duration' : 'int',
      commands: SIDECAR,
      ebrDefault: { 'backoff-multiplier': '2', 'backoff-attempt-limit': '6', 'backoff-threshold-time': '128s' }[name],
      meaning: 'retry of a failed full snapshot',
      effect: ignored(
        'store calls retry on their own policy (docs/stores.md), and a failed full snapshot is taken again at once',
      ),
    }),
  ),

  // restoration (server, restore, compact, initialize)
  {
    name: 'data-dir',
    kind: 'string',
    short: 'd',
    commands: RESTORATION,
    ebrDefault: 'default.etcd',
    meaning: "etcd's data dir",
    effect: {
      map: (value, command) => (command === 'compact' ? COMPACT_WORKS_IN_TEMP : { args: [`--data-dir=${value}`] }),
      here: '`--data-dir` (compact: no effect, it works in `--snapstore-temp-directory`)',
    },
  },
  {
    name: 'restoration-temp-snapshots-dir',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: 'default.restoration.tmp',
    meaning: 'folder for deltas fetched during a restore',
    effect: ignored('deltas stream into the restore; none is kept on disk'),
  },
  {
    name: 'name',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: 'default',
    meaning: 'member name',
    effect: {
      map: (value, command) => (command === 'compact' ? COMPACT_NO_MEMBER : { args: [`--name=${value}`] }),
      here: '`--name` (compact: no effect)',
    },
  },
  {
    name: 'initial-cluster',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: 'default=http://localhost:2380',
    meaning: "the cluster's members, as etcd's flag",
    effect: {
      map: (value, command) => (command === 'compact' ? COMPACT_NO_MEMBER : { args: [`--initial-cluster=${value}`] }),
      here: '`--initial-cluster` (compact: no effect)',
    },
  },
  {
    name: 'initial-cluster-token',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: 'etcd-cluster',
    meaning: "the cluster's token, as etcd's flag",
    effect: {
      map: (value, command) =>
        command === 'compact' ? COMPACT_NO_MEMBER : { args: [`--initial-cluster-token=${value}`] },
      here: '`--initial-cluster-token` (compact: no effect)',
    },
  },
  {
    name: 'initial-advertise-peer-urls',
    kind: 'list',
    commands: RESTORATION,
    ebrDefault: 'http://localhost:2380',
    meaning: "this member's peer URLs",
    effect: {
      map: (value, command) =>
        command === 'compact' ? COMPACT_NO_MEMBER : { args: [`--initial-advertise-peer-urls=${value}`] },
      here: '`--initial-advertise-peer-urls` (compact: no effect)',
    },
  },
  {
    name: 'skip-hash-check',
    kind: 'bool',
    commands: RESTORATION,
    ebrDefault: 'false',
    meaning: "restore a snapshot without etcd's sha256 trailer",
    effect: ignored(
      "every snapshot ebr or we write carries etcd's sha256 trailer, always checked (or proven by our recorded sha256)",
    ),
  },
  {
    name: 'max-fetchers',
    kind: 'int',
    commands: RESTORATION,
    ebrDefault: '6',
    meaning: 'deltas fetched at once',
    effect: {
      map: (value, command) =>
        command === 'server'
          ? 'the restores of the sidecar fetch with their own default'
          : { args: [`--max-fetchers=${value}`] },
      here: '`--max-fetchers` (server: no effect, its restores run with their default)',
    },
  },
  {
    name: 'max-call-send-message-size',
    kind: 'int',
    commands: RESTORATION,
    ebrDefault: '10485760',
    meaning: "largest gRPC message to ebr's embedded etcd",
    effect: ignored(EMBEDDED_ETCD),
  },
  {
    name: 'max-request-bytes',
    kind: 'int',
    commands: RESTORATION,
    ebrDefault: '10485760',
    meaning: "largest request ebr's embedded etcd accepts",
    effect: {
      map: (value, command) => (command === 'restore' ? { args: [`--max-request-bytes=${value}`] } : EMBEDDED_ETCD),
      here: 'restore: `--max-request-bytes` (for `--replay grpc`); elsewhere no effect',
    },
  },
  {
    name: 'max-txn-ops',
    kind: 'int',
    commands: RESTORATION,
    ebrDefault: '10240',
    meaning: "most operations in one txn of ebr's embedded etcd",
    effect: {
      map: (value, command) => (command === 'restore' ? { args: [`--max-txn-ops=${value}`] } : EMBEDDED_ETCD),
      here: 'restore: `--max-txn-ops` (for `--replay grpc`); elsewhere no effect',
    },
  },
  {
    name: 'embedded-etcd-quota-bytes',
    kind: 'int',
    commands: RESTORATION,
    ebrDefault: '8589934592',
    meaning: "backend quota of ebr's embedded etcd",
    effect: ignored(EMBEDDED_ETCD),
  },
  {
    name: 'auto-compaction-mode',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: 'periodic',
    meaning: "auto-compaction of ebr's embedded etcd",
    effect: ignored(EMBEDDED_ETCD),
  },
  {
    name: 'auto-compaction-retention',
    kind: 'string',
    commands: RESTORATION,
    ebrDefault: '30m',
    meaning: "auto-compaction retention of ebr's embedded etcd",
    effect: ignored(EMBEDDED_ETCD),
  },
  {
    name: 'next-cluster-version-compatible',
    kind: 'bool',
    commands: RESTORATION,
    ebrDefault: 'false',
    versions: 'v0.41.1–v0.41.2',
    meaning: "let ebr's embedded etcd read a db of the next etcd version",
    effect: ignored(EMBEDDED_ETCD),
  },

  // health: leases (server; the snapshot leases also compact)
  {
    name: 'enable-snapshot-lease-renewal',
    kind: 'bool',
    commands: ['server', 'compact'],
    ebrDefault: 'false',
    meaning: 'keep the full- and delta-snapshot Leases (compact: the full one)',
    effect: {
      map: (value, command) =>
        command === 'compact' ? { args: [] } : { args: [`--enable-snapshot-lease-renewal=${value}`] },
      here: '`--enable-snapshot-lease-renewal`; compact: the full-snapshot Lease is renewed after the compacted snapshot is stored',
    },
  },
  {
    name: 'full-snapshot-lease-name',
    kind: 'string',
    commands: ['server', 'compact'],
    ebrDefault: 'full-snapshot-revisions',
    meaning: 'name of the full-snapshot Lease',
    effect: {
      map: (value, command) =>
        command === 'compact' ? { args: [] } : { args: [`--full-snapshot-lease-name=${value}`] },
      here: '`--full-snapshot-lease-name` (compact: the Lease it renews)',
      applyDefault: true,
    },
  },
  {
    name: 'delta-snapshot-lease-name',
    kind: 'string',
    commands: ['server', 'compact'],
    ebrDefault: 'delta-snapshot-revisions',
    meaning: 'name of the delta-snapshot Lease',
    effect: {
      map: (value, command) =>
        command === 'compact'
          ? 'compact renews the full-snapshot Lease only, as ebr'
          : { args: [`--delta-snapshot-lease-name=${value}`] },
      here: '`--delta-snapshot-lease-name` (compact: no effect, as in ebr)',
      applyDefault: true,
    },
  },
  {
    name: 'enable-member-lease-renewal',
    kind: 'bool',
    commands: ['server'],
    ebrDefault: 'false',
    meaning: "renew the member's Lease",
    effect: same('enable-member-lease-renewal'),
  },
  {
    name: 'k8s-heartbeat-duration',
    kind: 'duration',
    commands: ['server'],
    ebrDefault: '30s',
    meaning: 'how often the member Lease is renewed',
    effect: same('k8s-heartbeat-duration', { applyDefault: true }),
  },
  {
    name: 'enable-etcd-member-gc',
    kind: 'bool',
    commands: ['server'],
    ebrDefault: 'false',
    versions: 'v0.23–v0.41.2',
    meaning: 'remove members whose pods are gone',
    effect: ignored('etcd-druid removes members when it scales down; the sidecar never removes one'),
  },
  {
    name: 'k8s-member-gc-duration',
    kind: 'duration',
    commands: ['server'],
    ebrDefault: '60s',
    versions: 'v0.23–v0.41.2',
    meaning: 'how often members are checked for removal',
    effect: ignored('etcd-druid removes members when it scales down; the sidecar never removes one'),
  },

  // leader election (server)
  {
    name: 'reelection-period',
    kind: 'duration',
    commands: ['server'],
    ebrDefault: '5s',
    meaning: 'how often leadership is checked',
    effect: same('reelection-period', { applyDefault: true }),
  },
  {
    name: 'etcd-connection-timeout-leader-election',
    kind: 'duration',
    commands: ['server'],
    ebrDefault: '5s',
    meaning: 'timeout of the status call of the leadership check',
    effect: ignored('the status call of the leadership check times out after `--reelection-period`'),
  },

  // the server itself
  {
    name: 'config-file',
    kind: 'string',
    commands: ['server'],
    ebrDefault: '""',
    meaning: "ebr's whole configuration as YAML",
    effect: {
      refused: "ebr's configuration file is not read here: give its settings as flags (docs/moving-from-ebr.md)",
    },
  },
  {
    name: 'log-level',
    kind: 'int',
    commands: ['server'],
    ebrDefault: '4',
    meaning: 'logrus level: 0 panic … 4 info, 5 debug, 6 trace',
    effect: {
      map: (value) => ({
        args: [`--log-level=${Number(value) <= 2 ? 'error' : Number(value) === 3 ? 'warn' : 'info'}`],
      }),
      here: '`--log-level`: 0–2 error, 3 warn, 4 and above info',
    },
  },
  {
    name: 'use-etcd-wrapper',
    kind: 'bool',
    commands: ['server'],
    ebrDefault: 'false',
    versions: 'v0.30.2+',
    meaning: 'serve what etcd-wrapper asks for',
    effect: ignored('the sidecar always serves what etcd-wrapper calls (`/initialization/*`, `/config`)'),
  },
  ...(['secondary-backup-sync-enabled', 'secondary-backup-sync-period'] as const).map(
    (name): EbrFlag => ({
      name,
      kind: name.endsWith('enabled') ? 'bool' : 'duration',
      commands: ['server'],
      ebrDefault: name.endsWith('enabled') ? 'false' : '1h',
      versions: 'v0.41+',
      meaning: 'copy the store to a secondary store from the sidecar',
      effect: ignored(
        'a secondary store is not kept in sync from the sidecar; run etcd-copy-backups as a Job (docs/copy-backups.md)',
      ),
    }),
  ),

  // compactor (compact)
  {
    name: 'defragment',
    kind: 'bool',
    commands: ['compact'],
    ebrDefault: 'true',
    meaning: 'defragment the compacted db',
    effect: same('defragment'),
  },
  {
    name: 'metrics-scrape-wait-duration',
    kind: 'duration',
    commands: ['compact'],
    ebrDefault: '0s',
    versions: 'v0.24.5+',
    meaning: 'wait after compacting so that Prometheus scrapes the metrics',
    effect: ignored('etcd-compact serves no metrics endpoint to wait for; its result is the Lease and its log'),
  },

  // validation (initialize)
  {
    name: 'validation-mode',
    kind: 'string',
    commands: ['initialize'],
    ebrDefault: 'full',
    meaning: 'sanity or full check of the data dir',
    effect: renamed('mode', { applyDefault: true }),
  },
  {
    name: 'experimental-fail-below-revision',
    kind: 'int',
    commands: ['initialize'],
    ebrDefault: '0',
    versions: 'v0.23–v0.42',
    meaning: 'data below this revision is invalid',
    effect: {
      map: (value) => ({ args: Number(value) > 0 ? [`--fail-below-revision=${value}`] : [] }),
      here: '`--fail-below-revision` (0: none)',
    },
  },

  // copy
  {
    name: 'max-backups-to-copy',
    kind: 'int',
    commands: ['copy'],
    ebrDefault: '-1',
    meaning: 'copy the newest N backups (-1: all)',
    effect: same('max-backups-to-copy'),
  },
  {
    name: 'max-backup-age',
    kind: 'int',
    commands: ['copy'],
    ebrDefault: '-1',
    meaning: 'copy backups at most this many days old (-1: any)',
    effect: same('max-backup-age'),
  },
  {
    name: 'max-parallel-copy-operations',
    kind: 'int',
    commands: ['copy'],
    ebrDefault: '10',
    meaning: 'objects copied at once',
    effect: same('max-parallel-copy-operations'),
  },
  {
    name: 'wait-for-final-snapshot',
    kind: 'bool',
    commands: ['copy'],
    ebrDefault: 'false',
    meaning: 'first wait for a final full snapshot in the source',
    effect: same('wait-for-final-snapshot'),
  },
  {
    name: 'wait-for-final-snapshot-timeout',
    kind: 'duration',
    commands: ['copy'],
    ebrDefault: '0s',
    meaning: 'how long to wait for it (0: no limit)',
    effect: {
      map: (value) => ({ args: [`--wait-for-final-snapshot-timeout=${value === '0s' ? '0' : value}`] }),
      here: '`--wait-for-final-snapshot-timeout`',
    },
  },

  ...storeFlags('', STORE),
  ...storeFlags('source-', ['copy']),
  ...storeFlags('secondary-', ['server'], 'v0.41+'),
];

/** The flag of this name (or one-letter name), or undefined. */
export function findEbrFlag(name: string): EbrFlag | undefined {
  return EBR_FLAGS.find((flag) => flag.name === name || flag.short === name);
}
