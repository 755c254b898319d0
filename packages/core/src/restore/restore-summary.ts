import { recoveredLine } from '../backup/stored-versions.js';
import { formatBytes } from '../common/format-bytes.js';
import { resultStyle } from '../common/terminal-style.js';
import { formatProofReport } from '../proof/proof-summary.js';
import type { RestoreResult } from './restore.js';

/** The final lines a person reads: what was restored, from what, what was lost or skipped, and what it cost. */
export function formatSummary(result: RestoreResult): string {
  const lines = [
    `${resultStyle.green.bold('restored')} ${result.dataDir} at revision ${result.revision} (${result.keys} keys)`,
    `  from ${result.snapshot}${result.deltas.length > 0 ? ` and ${result.deltas.length} delta(s), replayed by ${result.replay}` : ''}`,
    `  verified by ${result.verify === 'check' ? 'a full check of the data dir and its db file' : 'etcd started on a copy'}${result.fingerprint ? `; keyspace sha256 ${result.fingerprint.sha256}` : ''}`,
    `  in ${(result.durationMs / 1000).toFixed(1)} s, peak memory ${formatBytes(result.peakRssBytes)}`,
  ];
  if (result.proof) lines.push(...formatProofReport(result.proof).map((line) => `  ${line}`));
  for (const s of result.skipped) lines.push(`  skipped ${s.name}: ${s.reason}`);
  for (const r of result.recovered ?? []) lines.push(recoveredLine(r, resultStyle.red.bold('RECOVERED')));
  if (result.lost) {
    lines.push(
      `  ${resultStyle.red.bold('LOST')} revisions ${result.lost.fromRevision}..${result.lost.toRevision}${result.lost.delta ? ` (${result.lost.delta})` : ''}: ${result.lost.reason}`,
    );
  }
  if (result.uncertain) {
    const { known, readBack } = result.uncertain;
    lines.push(
      `  ${resultStyle.red.bold('UNSURE')} the state at --to-time: revision ${known.revision} was known at ${known.at}, revisions ${readBack.from}..${readBack.to} were read back from etcd from ${readBack.firstSeenAt} on (not watched live); restored ${known.revision}`,
    );
  }
  if (result.timesUnrecorded) {
    lines.push(
      `  note: ${result.timesUnrecorded} does not record which of its events came live (ebr's, or an older etcd-steward's): etcd may have been past revision ${result.revision} at --to-time`,
    );
  }
  if (result.setAside) {
    lines.push(
      `  set aside ${result.setAside.snapshots.length} later snapshot(s) to ${result.setAside.folder}/: the store goes on from here`,
    );
  }
  return `${lines.join('\n')}\n`;
}
