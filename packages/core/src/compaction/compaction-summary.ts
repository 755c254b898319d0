import { recoveredLine } from '../backup/stored-versions.js';
import { formatBytes } from '../common/format-bytes.js';
import type { CompactionResult } from './compact-chain.js';

/** The final lines a person reads: what was folded into what, the sizes before and after, and what it cost. */
export function formatCompactionSummary(result: CompactionResult): string {
  const memory = [
    `${formatBytes(result.peakRssBytes)} (this process)`,
    ...(result.etcdPeakRssBytes !== undefined ? [`${formatBytes(result.etcdPeakRssBytes)} (etcd)`] : []),
  ];
  return `${[
    `compacted ${result.store}: ${result.revisionsFolded} revision(s) in ${result.objects.length} object(s) folded into ${result.name}`,
    `  revision ${result.revision}, ${result.keys} keys${result.final ? ', final' : ''}; chain ${formatBytes(result.chainBytes)} before, snapshot ${formatBytes(result.snapshotBytes)} after (db ${formatBytes(result.dbBytes)})`,
    `  in ${(result.durationMs / 1000).toFixed(1)} s, peak memory ${memory.join(', ')}`,
    ...(result.recovered ?? []).map((r) => recoveredLine(r)),
  ].join('\n')}\n`;
}
