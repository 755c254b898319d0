import type { BootstrapResult } from './bootstrap.js';

/** The decision line, then what was done (or would be), then how etcd must start. */
export function formatBootstrap(result: BootstrapResult): string {
  const lines = [`${result.dryRun ? 'would ' : ''}${result.case}: ${result.reason}`];
  for (const step of result.steps) lines.push(`  ${result.dryRun ? 'would: ' : ''}${step}`);
  if (result.etcd) {
    lines.push(
      `start etcd with: --initial-cluster-state ${result.etcd.initialClusterState} --initial-cluster ${result.etcd.initialCluster}`,
    );
  }
  if (result.case === 'rejoin' && !result.dryRun) {
    lines.push('once etcd runs: etcd-validate promote (same member flags and --endpoints) makes it a voting member');
  }
  return `${lines.join('\n')}\n`;
}
