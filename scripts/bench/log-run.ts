// One measured run of `etcd-restore log` on the suite's store (run.ts): the history of one key of the write load,
// checked against what the load wrote to it, each put's value known from its index alone (write-load.ts).
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { type Measurement, measure } from './measure.ts';
import { failure } from './restore-run.ts';
import { loadValue, valuePool } from './write-load.ts';

const root = new URL('../..', import.meta.url).pathname;

/** The load's key whose history is read: one of `over`, written every `over` puts. */
const KEY_INDEX = 42;

export async function measureLog(
  storeDir: string,
  revisions: number,
  over: number,
): Promise<{ run: Measurement; result: string; wrong?: string }> {
  const key = `/bench/${String(KEY_INDEX).padStart(6, '0')}`;
  const run = await measure(process.execPath, [
    join(root, 'packages/restore/bin/etcd-restore.js'),
    ...['log', '--store', `file://${storeDir}`, '--prefix', key, '--output', 'json'],
  ]);
  if (run.code !== 0) return { run, result: failure(run), wrong: failure(run) };
  const rows = run.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { revision: number; key: string; type: string; valueSha256: string });
  // the puts the load made to the key, newest first, and their values
  const pool = valuePool();
  const indexes: number[] = [];
  for (let i = KEY_INDEX; i < revisions; i += over) indexes.unshift(i);
  const expected = indexes.map((i) =>
    createHash('sha256')
      .update(loadValue(pool, i, 1024))
      .digest('hex'),
  );
  const got = rows.map((r) => (r.type === 'put' && r.key === key ? r.valueSha256 : `${r.type} ${r.key}`));
  const descending = rows.every((r, i) => i === 0 || r.revision < rows[i - 1].revision);
  const same = descending && got.length === expected.length && got.every((sha, i) => sha === expected[i]);
  return {
    run,
    result: `${rows.length} puts of ${key}, newest first${same ? '; values = the load' : ''}`,
    ...(same ? {} : { wrong: `the log of ${key} is not the ${expected.length} puts the load made to it` }),
  };
}
