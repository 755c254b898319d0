import { createReadStream } from 'node:fs';
import { SnapshotRevisionScanner } from './snapshot-revision.js';

/** The store revision of an etcd bbolt file (e.g. a restored `member/snap/db`), read in one streaming pass. */
export async function dbFileRevision(path: string): Promise<number> {
  const scanner = new SnapshotRevisionScanner();
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) scanner.write(chunk as Buffer);
  return scanner.revision();
}
