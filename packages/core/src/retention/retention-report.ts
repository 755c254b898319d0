import { formatBytes } from '../common/format-bytes.js';
import { resultStyle } from '../common/terminal-style.js';
import type { PruneReport } from './prune-store.js';
import type { Decision } from './retention-plan.js';

/** One object as the report shows it: the plan's decision and, after a real run, what became of it. */
export interface ReportRow extends Decision {
  /** After a real run, for objects the plan deletes. */
  result?: 'deleted' | 'immutable' | 'failed' | 'not tried';
  reason?: string;
}

export interface ReportTotals {
  objects: number;
  bytes: number;
}

export interface PruneSummary {
  dryRun: boolean;
  kept: ReportTotals;
  /** In a dry run: what would be deleted. */
  deleted: ReportTotals;
  immutable: ReportTotals;
  failed: ReportTotals;
  untouched: number;
  uploadsAborted?: number;
}

export function reportRows(report: PruneReport): ReportRow[] {
  return report.plan.decisions.map((d) => {
    if (d.action === 'keep' || report.dryRun) return { ...d };
    const o = report.outcomes.get(d.name);
    return { ...d, result: o?.result ?? 'not tried', ...(o?.reason ? { reason: o.reason } : {}) };
  });
}

export function summarize(report: PruneReport, rows = reportRows(report)): PruneSummary {
  const total = (pick: (r: ReportRow) => boolean): ReportTotals => {
    const chosen = rows.filter(pick);
    return { objects: chosen.length, bytes: chosen.reduce((s, r) => s + r.size, 0) };
  };
  const deleting = (r: ReportRow) => r.action === 'delete';
  return {
    dryRun: report.dryRun,
    kept: total((r) => r.action === 'keep' || (deleting(r) && r.result !== undefined && r.result !== 'deleted')),
    deleted: total((r) => deleting(r) && (report.dryRun || r.result === 'deleted')),
    immutable: total((r) => r.result === 'immutable'),
    failed: total((r) => r.result === 'failed' || r.result === 'not tried'),
    untouched: report.plan.untouched,
    ...(report.uploadsAborted !== undefined ? { uploadsAborted: report.uploadsAborted } : {}),
  };
}

/** What a row's first column says. */
function status(row: ReportRow): string {
  if (row.action === 'keep') return 'keep';
  if (row.result === undefined) return 'delete';
  return { deleted: 'deleted', immutable: 'immutable, skipped', failed: 'FAILED', 'not tried': 'not tried' }[
    row.result
  ];
}

/** The text table: one line an object, oldest first, with the rule that decided it; then the summary. */
export function formatPruneTable(report: PruneReport): string {
  const rows = reportRows(report);
  const cells = rows.map((r) => [
    status(r),
    r.kind,
    new Date(r.createdAt * 1000).toISOString().replace('T', ' ').slice(0, 19),
    formatBytes(r.size),
    r.name,
    r.rule + (r.reason ? ` (${r.reason})` : ''),
  ]);
  const header = ['ACTION', 'KIND', 'CREATED (UTC)', 'SIZE', 'OBJECT', 'RULE'];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) =>
    c
      .map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  // Styled after padding: escape codes would count as width.
  const styled = (c: string[], i: number) => {
    const text = line(c);
    return rows[i].action === 'keep'
      ? text
      : rows[i].result === 'failed'
        ? resultStyle.red.bold(text)
        : resultStyle.red(text);
  };
  return [
    resultStyle.bold(line(header)),
    ...cells.map(styled),
    '',
    formatPruneSummary(summarize(report, rows)),
    '',
  ].join('\n');
}

export function formatPruneSummary(s: PruneSummary): string {
  const t = (x: ReportTotals) => `${x.objects} (${formatBytes(x.bytes)})`;
  const parts = [
    `${s.dryRun ? 'would delete' : 'deleted'} ${t(s.deleted)}`,
    `kept ${t(s.kept)}`,
    ...(s.dryRun ? [] : [`failed ${t(s.failed)}`, `immutable, skipped ${t(s.immutable)}`]),
    `not snapshots, untouched ${s.untouched}`,
    ...(s.uploadsAborted !== undefined ? [`incomplete uploads aborted ${s.uploadsAborted}`] : []),
  ];
  return `${s.dryRun ? 'dry run: ' : ''}${parts.join('; ')}`;
}

/** `--output json`: every object with its decision (and outcome), the summary, the warnings. */
export function pruneJson(report: PruneReport, location: string): string {
  const rows = reportRows(report).map((r) => ({ ...r, createdAt: new Date(r.createdAt * 1000).toISOString() }));
  return `${JSON.stringify({
    store: location,
    dryRun: report.dryRun,
    restorableFull: report.plan.restorableFull ?? null,
    objects: rows,
    summary: summarize(report),
    warnings: report.plan.warnings,
  })}\n`;
}
