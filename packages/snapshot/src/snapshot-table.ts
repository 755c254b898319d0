import type { CatalogEntry } from '@etcd-steward/core';

const COMPRESSION: Record<string, string> = { '': 'none', '.gz': 'gzip', '.Z': 'lzw', '.zlib': 'zlib', '.zst': 'zstd' };

/** The snapshot listing as an aligned text table, as `kubectl get` prints one. */
export function formatSnapshotTable(entries: CatalogEntry[]): string {
  const rows = [
    ['KIND', 'START', 'LAST', 'TAKEN (UTC)', 'SIZE', 'COMPRESSION', 'FINAL', 'NAME'],
    ...entries.map((e) => [
      e.kind,
      String(e.startRevision),
      String(e.lastRevision),
      new Date(e.createdAt * 1000)
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ''),
      String(e.size),
      COMPRESSION[e.compression] ?? e.compression,
      e.final ? 'yes' : '',
      e.name,
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
    .join('\n')}\n`;
}
