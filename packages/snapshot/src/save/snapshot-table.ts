import type { CatalogEntry } from '@etcd-steward/core/backup';
import { formatBytes, resultStyle } from '@etcd-steward/core/common';
import { compressionName } from '@etcd-steward/core/format';

/** One snapshot as `list` prints it; the text table shows the same fields under the same names. */
export interface ListedSnapshot {
  kind: 'Full' | 'Incr';
  startRevision: number;
  lastRevision: number;
  /** When it was taken, from its name: RFC 3339, UTC, to the second. */
  taken: string;
  /** Stored (compressed) size. */
  bytes: number;
  compression: string;
  final: boolean;
  name: string;
  /** In a store that keeps versions: the version a read takes where it is not the current one, and why. */
  version?: { id: string; why: string };
}

/** The store's snapshots by time taken, oldest first (a full before a delta of the same second, as taken). */
export function snapshotListing(entries: readonly CatalogEntry[]): ListedSnapshot[] {
  return [...entries]
    .sort(
      (a, b) =>
        a.createdAt - b.createdAt ||
        a.lastRevision - b.lastRevision ||
        (a.kind === b.kind ? 0 : a.kind === 'Full' ? -1 : 1) ||
        (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    )
    .map((e) => ({
      kind: e.kind,
      startRevision: e.startRevision,
      lastRevision: e.lastRevision,
      taken: new Date(e.createdAt * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
      bytes: e.size,
      compression: compressionName(e.compression),
      final: e.final,
      name: e.name,
      ...(e.versions?.id !== undefined ? { version: { id: e.versions.id, why: e.versions.why ?? '' } } : {}),
    }));
}

/** The listing as an aligned text table, as `kubectl get` prints one; sizes as people read them. */
export function formatSnapshotTable(listing: readonly ListedSnapshot[]): string {
  const rows = [
    ['KIND', 'START', 'LAST', 'TAKEN (UTC)', 'SIZE', 'COMPRESSION', 'FINAL', 'NAME'],
    ...listing.map((s) => [
      s.kind,
      String(s.startRevision),
      String(s.lastRevision),
      s.taken.replace('T', ' ').replace('Z', ''),
      formatBytes(s.bytes),
      s.compression,
      s.final ? 'yes' : '',
      s.version ? `${s.name} (version ${s.version.id}: ${s.version.why})` : s.name,
    ]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return `${rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    // Styled after padding: escape codes would count as width.
    .map((text, i) => (i === 0 ? resultStyle.bold(text) : text))
    .join('\n')}\n`;
}
