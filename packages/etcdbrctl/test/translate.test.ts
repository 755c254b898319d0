import { readFileSync } from 'node:fs';
import type { StewardError } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { EBR_COMMANDS, EBR_FLAGS, type EbrCommand, translate, withEbrReference } from '../src/index.js';

/** What etcd-druid v0.37.1 renders, as in ../shared/reference/druid/ (the first line is the subcommand). */
function druidArgs(file: string): { command: EbrCommand; args: string[] } {
  const text = readFileSync(new URL(`../../../test/fixtures/druid/${file}`, import.meta.url), 'utf8');
  const [command, ...args] = text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
  return { command: command as EbrCommand, args };
}

const DRUID_ENV = { HOME: '/home/nonroot', STORAGE_CONTAINER: 'default.bkp', POD_NAMESPACE: 'test-ns' };

/** The usage error a command line gets, or undefined. */
function refusal(command: EbrCommand, args: string[], env: NodeJS.ProcessEnv = DRUID_ENV): StewardError | undefined {
  try {
    translate(command, args, env);
    return undefined;
  } catch (err) {
    return err as StewardError;
  }
}

/**
 * Every flag etcd-backup-restore v0.23.0 to v0.43.0 registers with spf13/pflag (read from its cmd/ and pkg/ at each
 * tag), by subcommand.
 */
const STORE = ['storage-provider', 'store-container', 'store-prefix', 'max-parallel-chunk-uploads', 'min-chunk-size'];
const STORE_ALL = [...STORE, 'snapstore-temp-directory', 'store-endpoint-override'];
const CONNECTION = [
  'endpoints',
  'service-endpoints',
  'etcd-username',
  'etcd-password',
  'etcd-connection-timeout',
  'etcd-snapshot-timeout',
  'etcd-defrag-timeout',
  'insecure-transport',
  'insecure-skip-tls-verify',
  'cert',
  'key',
  'cacert',
];
const RESTORATION = [
  'initial-cluster',
  'initial-cluster-token',
  'data-dir',
  'restoration-temp-snapshots-dir',
  'initial-advertise-peer-urls',
  'name',
  'skip-hash-check',
  'max-fetchers',
  'max-call-send-message-size',
  'max-request-bytes',
  'max-txn-ops',
  'embedded-etcd-quota-bytes',
  'auto-compaction-mode',
  'auto-compaction-retention',
  'next-cluster-version-compatible',
];
const SNAPSHOTTER = [
  'schedule',
  'delta-snapshot-period',
  'delta-snapshot-memory-limit',
  'garbage-collection-period',
  'garbage-collection-policy',
  'max-backups',
  'delta-snapshot-retention-period',
  'compress-snapshots',
  'compression-policy',
  'backoff-multiplier',
  'backoff-attempt-limit',
  'backoff-threshold-time',
  'defragmentation-schedule',
];
const EBR: Record<EbrCommand, string[]> = {
  server: [
    'config-file',
    'log-level',
    'use-etcd-wrapper',
    ...CONNECTION,
    'server-port',
    'enable-profiling',
    'server-cert',
    'server-key',
    ...SNAPSHOTTER,
    ...STORE_ALL,
    ...RESTORATION,
    'enable-snapshot-lease-renewal',
    'enable-member-lease-renewal',
    'k8s-heartbeat-duration',
    'full-snapshot-lease-name',
    'delta-snapshot-lease-name',
    'enable-etcd-member-gc',
    'k8s-member-gc-duration',
    'etcd-connection-timeout-leader-election',
    'reelection-period',
    ...STORE_ALL.map((f) => `secondary-${f}`),
    'secondary-backup-sync-enabled',
    'secondary-backup-sync-period',
  ],
  snapshot: [...CONNECTION, ...STORE_ALL, ...SNAPSHOTTER],
  restore: [...RESTORATION, ...STORE_ALL],
  compact: [
    ...RESTORATION,
    ...STORE_ALL,
    'defragment',
    'etcd-snapshot-timeout',
    'etcd-defrag-timeout',
    'full-snapshot-lease-name',
    'delta-snapshot-lease-name',
    'enable-snapshot-lease-renewal',
    'metrics-scrape-wait-duration',
  ],
  initialize: ['validation-mode', 'experimental-fail-below-revision', ...RESTORATION, ...STORE_ALL, ...CONNECTION],
  copy: [
    'max-backups-to-copy',
    'max-backup-age',
    'max-parallel-copy-operations',
    'wait-for-final-snapshot',
    'wait-for-final-snapshot-timeout',
    ...STORE_ALL.map((f) => `source-${f}`),
    ...STORE_ALL,
  ],
};

describe("etcdbrctl's table", () => {
  it("has every flag of ebr v0.23 to v0.43, for exactly ebr's subcommands", () => {
    for (const command of EBR_COMMANDS) {
      const ours = EBR_FLAGS.filter((f) => f.commands.includes(command))
        .map((f) => f.name)
        .sort();
      expect({ command, flags: ours }).toEqual({ command, flags: [...new Set(EBR[command])].sort() });
    }
  });

  it('docs/moving-from-ebr.md shows the table as it is (node scripts/ebr-reference.ts rewrites it)', () => {
    const page = readFileSync(new URL('../../../docs/moving-from-ebr.md', import.meta.url), 'utf8');
    expect(withEbrReference(page)).toBe(page);
    for (const flag of EBR_FLAGS) expect(page).toContain(`\`--${flag.name}\``);
  });
});

describe('translate', () => {
  it("druid's sidecar arguments: every flag mapped or named as having no effect, ebr's store, gzip", () => {
    const { command, args } = druidArgs('args-server-v0.37.1.txt');
    const run = translate(command, args, DRUID_ENV);
    expect(run.program).toBe('etcd-snapshot');
    expect(run.args).toEqual(
      expect.arrayContaining([
        'run',
        '--store=s3://default.bkp/tmp',
        '--compression=gzip',
        '--endpoints=http://etcd-test-local:2379',
        '--delta-snapshot-period=1m0s',
        '--garbage-collection-period=12h0m0s',
        '--full-snapshot-lease-name=etcd-test-full-snap',
        '--delta-snapshot-lease-name=etcd-test-delta-snap',
        '--enable-member-lease-renewal=true',
        '--k8s-heartbeat-duration=10s',
        '--data-dir=/var/etcd/data/new.etcd',
        '--spool-dir=/var/etcd/data/temp/etcd-steward-spool',
      ]),
    );
    // Each flag druid gives shows either in the program's command line or in the no-effect line.
    const names = args.map((a) => /^--([^=]+)/.exec(a)![1]);
    const storeFlags = ['storage-provider', 'store-prefix', 'compress-snapshots', 'compression-policy'];
    const accounted = new Set([
      ...run.args.map((a) => /^--([^=]+)/.exec(a)?.[1]),
      ...run.noEffect.map((n) => n.flag),
      ...storeFlags,
      'snapstore-temp-directory',
    ]);
    expect(names.filter((n) => !accounted.has(n))).toEqual([]);
    expect(run.noEffect.map((n) => n.flag).sort()).toEqual(
      [
        'auto-compaction-mode',
        'auto-compaction-retention',
        'embedded-etcd-quota-bytes',
        'etcd-connection-timeout',
        'etcd-snapshot-timeout',
        'insecure-skip-tls-verify',
        'insecure-transport',
        'restoration-temp-snapshots-dir',
        'service-endpoints',
        'use-etcd-wrapper',
      ].sort(),
    );
  });

  it("druid's compaction Job: etcd-compact in the temp directory, gzip, the full-snapshot Lease to renew", () => {
    const { command, args } = druidArgs('args-compact.txt');
    const run = translate(command, args, DRUID_ENV);
    expect(run).toMatchObject({
      program: 'etcd-compact',
      store: 's3://default.bkp/tmp',
      fullSnapshotLease: 'etcd-test-full-snap',
      createDirs: ['/var/etcd/data/tmp'],
    });
    expect(run.args).toEqual(
      expect.arrayContaining(['--temp-dir=/var/etcd/data/tmp', '--compression=gzip', '--etcd-snapshot-timeout=10m0s']),
    );
    expect(
      translate(
        command,
        args.filter((a) => !a.startsWith('--enable-snapshot-lease')),
        DRUID_ENV,
      ),
    ).not.toHaveProperty('fullSnapshotLease');
  });

  it("druid's copy Job: both stores, the source's container from SOURCE_STORAGE_CONTAINER when not given", () => {
    const { command, args } = druidArgs('args-copy.txt');
    expect(translate(command, args, DRUID_ENV).args).toEqual(
      expect.arrayContaining(['copy', '--from=s3://source-container/tmp', '--to=s3://target-container/tmp']),
    );
    const withoutContainers = args.filter((a) => !/^--(source-)?store-container=/.test(a));
    const env = { ...DRUID_ENV, STORAGE_CONTAINER: 'target-env', SOURCE_STORAGE_CONTAINER: 'source-env' };
    expect(translate(command, withoutContainers, env).args).toEqual(
      expect.arrayContaining(['--from=s3://source-env/tmp', '--to=s3://target-env/tmp']),
    );
  });

  it('resolves a Local container under HOME as ebr, default.bkp when none is given', () => {
    const run = (args: string[]) => translate('restore', ['--data-dir=/d', ...args], { HOME: '/home/nonroot' });
    expect(
      run(['--storage-provider=Local', '--store-container=default.bkp', '--store-prefix=etcd-main']),
    ).toMatchObject({
      store: 'file:///home/nonroot/default.bkp/etcd-main',
    });
    expect(run([])).toMatchObject({ store: 'file:///home/nonroot/default.bkp' });
    // ebr joins even an absolute container to the home folder.
    expect(run(['--storage-provider=Local', '--store-container=/backups'])).toMatchObject({
      store: 'file:///home/nonroot/backups',
    });
  });

  it("compression: ebr's default gzip, none when switched off, zlib; lzw is refused", () => {
    const compression = (args: string[]) =>
      translate('server', ['--storage-provider=S3', ...args], DRUID_ENV).args.find((a) =>
        a.startsWith('--compression'),
      );
    expect(compression([])).toBe('--compression=gzip');
    expect(compression(['--compress-snapshots=false'])).toBe('--compression=none');
    expect(compression(['--compress-snapshots', '--compression-policy', 'zlib'])).toBe('--compression=zlib');
    expect(refusal('server', ['--storage-provider=S3', '--compression-policy=lzw'])?.message).toMatch(
      /lzw.*give --compression-policy=gzip/,
    );
  });

  it("ebr's defaults where druid leaves a flag out, ours where ebr has the same", () => {
    const run = translate('server', ['--storage-provider=S3'], DRUID_ENV);
    expect(run.args).toEqual(
      expect.arrayContaining([
        '--garbage-collection-period=1m',
        '--schedule=0 */1 * * *',
        '--delta-snapshot-period=20s',
      ]),
    );
    expect(translate('server', [], DRUID_ENV).args).toContain('--no-snapshotter');
  });

  it('keeps the etcd password off the command line', () => {
    const run = translate('server', ['--etcd-username=root', '--etcd-password=s3cret'], DRUID_ENV);
    expect(run.args).toContain('--user=root');
    expect(run.args.join(' ')).not.toContain('s3cret');
    expect(run.env).toEqual({ ETCD_STEWARD_PASSWORD: 's3cret' });
  });

  it('reads flags as pflag does: -s, repeated lists, yes/no values', () => {
    const run = translate(
      'server',
      [
        '-s',
        '*/5 * * * *',
        '--endpoints',
        'http://a:2379',
        '--endpoints=http://b:2379',
        '--enable-member-lease-renewal',
      ],
      DRUID_ENV,
    );
    expect(run.args).toEqual(
      expect.arrayContaining([
        '--schedule=*/5 * * * *',
        '--endpoints=http://a:2379,http://b:2379',
        '--enable-member-lease-renewal=true',
      ]),
    );
  });

  it('refuses unknown flags, flags of another subcommand, stray words and bad values with exit 2', () => {
    const cases: [EbrCommand, string[], RegExp][] = [
      ['server', ['--bogus=1'], /unknown flag --bogus/],
      ['copy', ['--schedule=* * * * *'], /--schedule is not a flag of ebr's copy/],
      ['restore', ['extra'], /"extra" is not a flag/],
      ['server', ['--delta-snapshot-period=often'], /Go duration/],
      ['server', ['--enable-profiling=maybe'], /true or false/],
      ['server', ['--config-file=/etc/ebr.yaml'], /configuration file is not read/],
      ['server', ['--storage-provider=S3'], /needs a bucket: give --store-container or set STORAGE_CONTAINER/],
    ];
    for (const [command, args, message] of cases) {
      const err = refusal(command, args, command === 'server' && args[0].startsWith('--storage') ? {} : DRUID_ENV);
      expect(err?.message).toMatch(message);
      expect(err?.exitCode).toBe(2);
    }
  });
});
