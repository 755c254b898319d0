import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { parse, stringify } from 'yaml';
import { dashboardExpressions, metricNames, type RuleGroups, rules, rulesFile } from './monitoring-kit.js';
import { type PrometheusServer, startPrometheus } from './servers/prometheus-server.js';
import { metric, startSidecar, startWriter, waitFor } from './sidecar-helpers.js';
import { switchableStore } from './switchable-store.js';
import { tempDir } from './temp-dir.js';

// One etcd version: the rules against the sidecar's metrics, which do not change with etcd's version.

const at = tempDir('monitoring-prometheus-');

/** The rules as they are, but every alert's `for:` a few seconds: the expressions are the ones deploy/ ships. */
function rulesWithShortFor(): string {
  const groups = parse(readFileSync(rulesFile, 'utf8')) as RuleGroups;
  for (const rule of groups.groups.flatMap((g) => g.rules)) if (rule.for) rule.for = '3s';
  return stringify(groups);
}

/** The names a scrape declares (`# TYPE name type`), with their types. */
function declared(scrape: string): Map<string, string> {
  return new Map([...scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name, type]));
}

async function firing(prometheus: PrometheusServer, alert: string): Promise<boolean> {
  return (await prometheus.alerts()).some((a) => a.labels.alertname === alert && a.state === 'firing');
}

async function active(prometheus: PrometheusServer, alert: string): Promise<boolean> {
  return (await prometheus.alerts()).some((a) => a.labels.alertname === alert);
}

it('a real Prometheus with the rules: the store down fires the store and full-snapshot alerts, the store back resolves them; full snapshots failing alone fire the full-snapshot alert alone; every metric the rules and the dashboard read is scraped', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const writer = startWriter(cluster.client(), { concurrency: 1 });
  onTestFinished(() =>
    writer.stop().then(
      () => undefined,
      () => undefined,
    ),
  );
  const store = await switchableStore(at, 'store');
  const real = await store.directory('real');
  await store.point(real);
  const notADirectory = at('not-a-directory');
  await writeFile(notADirectory, 'not a directory');
  // A full snapshot every 3 s: the rules allow 6 s without one (the schedule's gap, twice).
  // Its scratch dir switchable too: full snapshots are written there on their way to the store, deltas are not.
  const scratch = await switchableStore(at, 'scratch');
  const scratchDir = await scratch.directory('real');
  await scratch.point(scratchDir);
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: store.url,
    dir: at('sidecar'),
    args: ['--schedule', '*/3 * * * * *', '--temp-dir', scratch.path],
  });
  onTestFinished(() => sidecar.kill());
  await waitFor(
    'a full snapshot',
    async () => ((await metric(sidecar.url, 'etcdbr_snapshot_latest_timestamp', 'kind="Full"')) ?? 0) > 0,
  );

  // Every metric a rule or a panel reads, in a real scrape of the sidecar or of etcd (etcd's own: the quota).
  const sidecarUrl = new URL(sidecar.url);
  const etcdUrl = new URL(cluster.endpoints[0]);
  const scraped = new Map([
    ...declared(await (await fetch(`${sidecar.url}/metrics`)).text()),
    ...declared(await (await fetch(`${cluster.endpoints[0]}/metrics`)).text()),
  ]);
  const read = new Set(
    [...rules().groups.flatMap((g) => g.rules.map((r) => r.expr)), ...dashboardExpressions()]
      .flatMap(metricNames)
      .filter((name) => !name.includes(':')),
  );
  expect(read.size).toBeGreaterThan(25);
  expect([...read].filter((name) => !scraped.has(name))).toEqual([]);
  expect(scraped.get('etcd_snapshot_period_seconds')).toBe('gauge');
  expect(scraped.get('etcd_server_quota_backend_bytes')).toBe('gauge');
  // a failed NOSPACE recovery is an increase from 0, not a series that appears at 1 (which increase() misses)
  expect(await metric(sidecar.url, 'etcd_snapshot_nospace_recoveries_total', 'succeeded="false"')).toBe(0);

  const labels = { namespace: 'e2e', job: 'etcd-main' };
  const prometheus = await startPrometheus({
    dir: at('prometheus'),
    targets: [
      { address: sidecarUrl.host, labels },
      { address: etcdUrl.host, labels },
    ],
    rules: { 'etcd-steward.rules.yaml': rulesWithShortFor() },
  });
  onTestFinished(() => prometheus.stop());
  // The schedule's gap, as the sidecar exports it and the rules read it.
  await waitFor(
    'the rules to read the schedule',
    async () => (await prometheus.query('etcd_steward:full_snapshot_allowed_age_seconds{namespace="e2e"}')) === 6,
  );
  await waitFor(
    'a sample of the full snapshot age',
    async () => (await prometheus.query('etcd_steward:full_snapshot_age_seconds')) !== undefined,
  );
  // etcd's own metrics reach the quota rule: its database against its quota
  const quota = await waitFor('a sample of etcd', () =>
    prometheus.query('etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes'),
  );
  expect(quota).toBeGreaterThan(0);
  // Quiet while snapshots are stored: longer than the allowed age plus `for:`.
  await new Promise((r) => setTimeout(r, 10_000));
  expect(await active(prometheus, 'EtcdBackupStoreUnreachable')).toBe(false);
  expect(await active(prometheus, 'EtcdBackupFullSnapshotOverdue')).toBe(false);

  const down = Date.now();
  await store.point(notADirectory);
  await waitFor('EtcdBackupStoreUnreachable to fire', () => firing(prometheus, 'EtcdBackupStoreUnreachable'), 45_000);
  await waitFor(
    'EtcdBackupFullSnapshotOverdue to fire',
    () => firing(prometheus, 'EtcdBackupFullSnapshotOverdue'),
    45_000,
  );
  const fired = Date.now();
  expect(await metric(sidecar.url, 'etcd_snapshot_store_reachable')).toBe(0);

  await store.point(real);
  await waitFor(
    'EtcdBackupStoreUnreachable to resolve',
    async () => !(await active(prometheus, 'EtcdBackupStoreUnreachable')),
    45_000,
  );
  await waitFor(
    'EtcdBackupFullSnapshotOverdue to resolve',
    async () => !(await active(prometheus, 'EtcdBackupFullSnapshotOverdue')),
    60_000,
  );
  console.log(
    `monitoring e2e: both alerts fired ${((fired - down) / 1000).toFixed(1)} s after the store went down, resolved ${((Date.now() - fired) / 1000).toFixed(1)} s after it came back`,
  );

  // Full snapshots alone fail (their scratch folder is gone), the store answers and deltas go on: only the
  // full-snapshot alert fires, and resolves once full snapshots are stored again.
  await scratch.point(await scratch.directory('empty'));
  await waitFor(
    'EtcdBackupFullSnapshotOverdue to fire alone',
    () => firing(prometheus, 'EtcdBackupFullSnapshotOverdue'),
    45_000,
  );
  expect(await active(prometheus, 'EtcdBackupStoreUnreachable')).toBe(false);
  expect(await sidecar.log()).toMatch(/full snapshot failed; trying again/);
  await scratch.point(scratchDir);
  await waitFor(
    'EtcdBackupFullSnapshotOverdue to resolve again',
    async () => !(await active(prometheus, 'EtcdBackupFullSnapshotOverdue')),
    60_000,
  );
  await writer.stop();
});
