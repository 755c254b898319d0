import type { SavedFullSnapshot } from '@etcd-steward/core/backup';
import { formatBytes, resultStyle } from '@etcd-steward/core/common';

/** What `save` prints: the object, the revision it holds and its sizes (the db as etcd sent it, and as stored). */
export function saveSummary(saved: SavedFullSnapshot, location: string, output: 'text' | 'json'): string {
  if (output === 'json') {
    return `${JSON.stringify({
      name: saved.ref.name,
      revision: saved.revision,
      dbBytes: saved.dbSize,
      storedBytes: saved.storedSize,
      etcdVersion: saved.etcdVersion,
      seconds: saved.durationMs / 1000,
    })}\n`;
  }
  return `${resultStyle.green.bold('saved')} ${location}/${saved.ref.name} (revision ${saved.revision}, db ${formatBytes(saved.dbSize)}, stored ${formatBytes(saved.storedSize)})\n`;
}
