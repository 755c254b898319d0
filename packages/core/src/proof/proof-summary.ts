import { resultStyle } from '../common/terminal-style.js';
import type { ProofReport } from './proof-verdict.js';

/** The lines a person reads about a proof: the verdict, each member's hash against the backup's, the difference. */
export function formatProofReport(report: ProofReport): string[] {
  const lines: string[] = [];
  if (report.verdict === 'proven') {
    lines.push(
      `${resultStyle.green.bold('proven')} revision ${report.revision} against ${report.members.length} member(s) of cluster ${report.clusterId}: etcd's HashKV equals the backup's, compacted at ${report.compactRevision}${report.rows !== undefined ? ` (${report.rows} rows hashed in ${((report.hashMs ?? 0) / 1000).toFixed(1)} s)` : ''}`,
    );
  } else {
    const word =
      report.verdict === 'unprovable'
        ? resultStyle.yellow.bold('NOT PROVEN')
        : resultStyle.red.bold(report.verdict.toUpperCase());
    lines.push(`${word} revision ${report.revision}: ${report.reason ?? report.verdict}`);
  }
  for (const m of report.members) {
    lines.push(
      `  ${m.endpoint} (member ${m.memberId}): hash ${m.hash} ${m.equal ? '=' : '≠'} backup ${m.backupHash}, compacted at ${m.compactRevision}`,
    );
  }
  for (const u of report.unreachable ?? []) lines.push(`  ${u.endpoint}: did not answer (${u.reason})`);
  const d = report.difference;
  if (d?.key) lines.push(`  first differing key ${d.key.key}: cluster ${d.key.cluster}; backup ${d.key.backup}`);
  if (d?.revision) {
    lines.push(
      `  first differing revision ${d.revision.revision}: cluster ${d.revision.cluster}; backup ${d.revision.backup}`,
    );
  }
  if (d)
    lines.push(
      `  revisions compared since the compaction: ${d.revisionsCompared}, the same in both: ${d.revisionsSame}`,
    );
  return lines;
}
