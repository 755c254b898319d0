import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** A WAL segment file, `%016x-%016x.wal`: its sequence number and the raft index of its first entry. */
export interface WalSegment {
  name: string;
  path: string;
  seq: bigint;
  index: bigint;
}

const NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

/**
 * The segments of a WAL directory in order (docs/etcd-formats.md §5.1). Preallocated `*.tmp` files, saved
 * `*.broken` files and anything else are not segments, as etcd ignores them.
 */
export async function listWalSegments(dir: string): Promise<WalSegment[]> {
  const segments: WalSegment[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const m = NAME.exec(name);
    if (m) segments.push({ name, path: join(dir, name), seq: BigInt(`0x${m[1]}`), index: BigInt(`0x${m[2]}`) });
  }
  return segments;
}

/** Why etcd would refuse this order of segments, or undefined: sequence numbers must follow one another. */
export function segmentGap(segments: WalSegment[]): string | undefined {
  for (let i = 1; i < segments.length; i++) {
    if (segments[i].seq !== segments[i - 1].seq + 1n) {
      return `WAL segment ${segments[i].name} does not follow ${segments[i - 1].name} (a segment is missing)`;
    }
    if (segments[i].index < segments[i - 1].index) {
      return `WAL segment ${segments[i].name} starts at a lower raft index than ${segments[i - 1].name}`;
    }
  }
  return undefined;
}
