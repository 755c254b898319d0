import { closeSync, openSync } from 'node:fs';
import { BboltDbWriter } from './bbolt-db-writer.js';

/** A new bbolt db file holding the named buckets, each empty (the file must not exist). */
export function writeEmptyDb(file: string, buckets: readonly string[], pageSize = 4096): void {
  const fd = openSync(file, 'wx', 0o600);
  try {
    const writer = new BboltDbWriter(fd, { pageSize, txid: 0n });
    for (const name of [...buckets].sort()) writer.startBucket(Buffer.from(name, 'latin1'));
    writer.finish();
  } finally {
    closeSync(fd);
  }
}
