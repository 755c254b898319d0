import { readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';

/**
 * The file names ebr v0.23's Local provider takes for snapshots in a store folder, by its rules
 * (pkg/snapstore local_snapstore.go `List` and snapshot.go `ParseSnapshot`): it walks every file under the
 * folder; a path that contains `v1` or `v2` is parsed from its last `v1/` (else `v2/`) on: at most three
 * `/`-separated parts, which split by `-` into exactly four tokens: kind `Full` or `Incr`, two integer
 * revisions (start ≤ last) and an integer of seconds before the first `.`. Everything else it skips.
 * The rules see the path below `root` only: ebr applies them to the whole path, so a store folder whose own
 * path holds `v1/` (a temporary folder named `…v1`) would hide every snapshot, a fault of the folder's name and
 * not of what the store holds. Returns the paths relative to `root`, sorted.
 */
export async function ebrLocalListing(root: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = relative(root, join(entry.parentPath, entry.name));
    if ((path.includes('v1') || path.includes('v2')) && parsesAsSnapshot(path)) found.push(path);
  }
  return found.sort();
}

function parsesAsSnapshot(path: string): boolean {
  let at = path.lastIndexOf('v1/');
  if (at < 0) at = path.lastIndexOf('v2/');
  if (at < 0) return false;
  const parts = path.slice(at + 3).split('/');
  if (parts.length > 3) return false;
  // v1 keeps a Backup-<unix> folder before the name; v2 takes the whole rest as the name
  const name = (path[at + 1] === '1' ? parts.slice(1) : parts).join('/');
  const tokens = name.split('-');
  if (tokens.length !== 4 || (tokens[0] !== 'Full' && tokens[0] !== 'Incr')) return false;
  const integer = (t: string) => /^[+-]?\d+$/.test(t);
  if (!integer(tokens[1]) || !integer(tokens[2]) || Number(tokens[1]) > Number(tokens[2])) return false;
  return integer(tokens[3].split('/')[0].split('.')[0]);
}
