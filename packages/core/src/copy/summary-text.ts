import { type RecoveredObject, recoveredLine } from '../backup/stored-versions.js';
import { formatBytes } from '../common/format-bytes.js';
import type { CopySummary, DamagedObject } from './copy-backups.js';
import type { StoreVerifyReport } from './store-verify.js';
import type { ExportSummary } from './tar-export.js';
import type { ImportSummary } from './tar-import.js';

/** The lines a person reads after each command of etcd-copy-backups; `--output json` prints the objects instead. */
const cost = (r: { bytes: number; durationMs: number; bytesPerSecond: number }) =>
  `${formatBytes(r.bytes)} in ${(r.durationMs / 1000).toFixed(1)} s (${formatBytes(r.bytesPerSecond)}/s)`;

const recoveredLines = (recovered: readonly RecoveredObject[] = []) => recovered.map((r) => recoveredLine(r));

const damagedLines = (damaged: DamagedObject[], what: string) =>
  damaged.map((d) => `  DAMAGED, not ${what}: ${d.name}: ${d.problem}`);

export function formatCopySummary(s: CopySummary): string {
  return lines([
    `copied ${s.copied} of ${s.selected} snapshot(s) from ${s.from} to ${s.to}: ${cost(s)}`,
    `  ${s.skipped} already there${s.vanished ? `, ${s.vanished} gone from the source meanwhile` : ''}${s.ways.kernel ? `, ${s.ways.kernel} copied by the kernel` : ''}${s.ways.server ? `, ${s.ways.server} copied by the store's server` : ''}`,
    ...(s.finalSnapshot ? [`  final full snapshot: ${s.finalSnapshot}`] : []),
    ...recoveredLines(s.recovered),
    ...damagedLines(s.damaged, 'copied'),
  ]);
}

/** Encrypted snapshots that were checked without their key: what was and was not checked, and how to check all. */
const storedBytesLines = (names: string[]) =>
  names.length === 0
    ? []
    : [
        `  ${names.length} encrypted snapshot(s) checked as stored bytes only (sha256, encryption header, name), not decrypted: give --encryption-key-file to check their content`,
        ...names.map((name) => `    ${name}`),
      ];

export function formatExportSummary(s: ExportSummary): string {
  return lines([
    `exported ${s.objects} snapshot(s) up to revision ${s.lastRevision} from ${s.from} to ${s.to}: ${cost(s)}`,
    ...storedBytesLines(s.storedBytesOnly),
    ...recoveredLines(s.recovered),
  ]);
}

export function formatImportSummary(s: ImportSummary): string {
  return lines([
    `imported ${s.imported} of ${s.objects} snapshot(s) from ${s.from} into ${s.to}: ${cost(s)}`,
    `  ${s.skipped} already there`,
    ...storedBytesLines(s.storedBytesOnly),
    ...damagedLines(s.damaged, 'imported'),
  ]);
}

export function formatVerifyReport(r: StoreVerifyReport): string {
  const verdict = r.restorable
    ? r.missing
      ? `restorable up to revision ${r.restorable.revision} only, not to the newest, ${r.newestRevision}: revisions ${r.missing.from}..${r.missing.to} are in no sound delta`
      : `restorable to the newest revision, ${r.newestRevision}`
    : 'NOT restorable: no sound full snapshot';
  return lines([
    `${r.store}: ${verdict}`,
    ...(r.restorable ? [`  from ${r.restorable.full} and ${r.restorable.deltas.length} delta(s)`] : []),
    `  ${r.objects} snapshot(s) read, ${formatBytes(r.bytes)}; ${r.damaged.length} damaged`,
    ...(r.recovered.length > 0
      ? [
          `  ${r.recovered.length} snapshot(s) hidden or replaced since they were stored, read from older versions: see docs/operator.md, "The backups were tampered with"`,
        ]
      : []),
    ...recoveredLines(r.recovered),
    ...r.damaged.map((d) => `  DAMAGED ${d.name}: ${d.problem}`),
    ...(r.protection ? [`  protection: ${r.protection.summary}`] : []),
    ...r.fallbackGaps.map(
      (g) =>
        `  from ${g.full} (revision ${g.revision}) a restore stops short: revisions ${g.inNoDelta.map((r) => `${r.from}..${r.to}`).join(', ')} are in no sound delta`,
    ),
  ]);
}

function lines(list: string[]): string {
  return `${list.join('\n')}\n`;
}
