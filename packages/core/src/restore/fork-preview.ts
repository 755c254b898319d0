import { forkFolder } from '../backup/set-aside.js';
import { listSnapshots } from '../backup/snapshot-catalog.js';
import { openStore } from '../store/location.js';

/** What `etcd-restore --fork` would set aside after restoring `revision`: the folder and the snapshots it moves. */
export interface ForkPreview {
  /** `forks/<revision>-<unix seconds>`: the seconds are those of the real run. */
  folder: string;
  snapshots: string[];
}

/**
 * For `--fork --dry-run`: the snapshots past the restored revision, newest first, as the set-aside would move them
 * (backup/set-aside.ts, which lists them again under the store lock when it runs). Nothing is moved.
 */
export async function forkPreview(
  storeUrl: string,
  revision: number,
  encryptionKeyFile?: string,
): Promise<ForkPreview> {
  const store = await openStore(storeUrl, { encryptionKeyFile });
  try {
    const later = (await listSnapshots(store)).filter((e) => e.lastRevision > revision);
    return {
      folder: forkFolder(revision).replace(/-\d+$/, '-<unix seconds>'),
      snapshots: later.sort((a, b) => b.lastRevision - a.lastRevision).map((e) => e.name),
    };
  } finally {
    await store.close?.();
  }
}

/** The preview as text, for the end of the plan `--dry-run` prints. */
export function formatForkPreview(preview: ForkPreview): string {
  if (preview.snapshots.length === 0)
    return 'fork: the store holds nothing past the restored revision: nothing to set aside\n';
  return `fork: would set ${preview.snapshots.length} snapshot(s) past the restored revision aside under ${preview.folder}/\n${preview.snapshots.map((n) => `  ${n}\n`).join('')}`;
}
