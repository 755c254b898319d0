import { Gauge, type Registry } from 'prom-client';
import type { FullSchedule } from './full-schedule.js';

/**
 * The settings that alerts measure against, as gauges: a rules file imported unchanged for many clusters then
 * derives each cluster's thresholds from that cluster's own flags (deploy/monitoring/, docs/operator.md).
 */
export function registerSettingsMetrics(
  registry: Registry,
  settings: { schedule: FullSchedule; deltaPeriodMs: number; spoolMaxBytes: number },
): void {
  const registers = [registry];
  const period = new Gauge({
    name: 'etcd_snapshot_period_seconds',
    help: 'Full: the longest time between two runs of --schedule; Incr: --delta-snapshot-period (0: deltas off).',
    labelNames: ['kind'],
    registers,
  });
  period.set({ kind: 'Full' }, settings.schedule.longestGapSeconds(new Date()));
  period.set({ kind: 'Incr' }, settings.deltaPeriodMs / 1000);
  new Gauge({ name: 'etcd_snapshot_spool_max_bytes', help: "The spool's limit (--spool-max-bytes).", registers }).set(
    settings.spoolMaxBytes,
  );
}
