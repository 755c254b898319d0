import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runProgram } from './run-program.js';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sidecar-usage-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it.each([
  [['--schedule', 'every hour'], /--schedule "every hour" is not a cron schedule/],
  [['--schedule', '* * * *'], /--schedule "\* \* \* \*" is not a cron schedule \(4 fields, expected 5\)/],
  [['--delta-snapshot-period', '5'], /--delta-snapshot-period "5" is not a duration/],
  [['--delta-snapshot-period', '200ms'], /at least 1s/],
  [['--delta-snapshot-memory-limit', '10XB'], /--delta-snapshot-memory-limit "10XB" is not a size/],
  [['--spool-max-bytes', '0'], /--spool-max-bytes must be more than 0/],
  [['--server-port', '70000'], /--server-port "70000" is not a port/],
  [['--server-port', 'abc'], /--server-port "abc" is not a number/],
  [['--server-tls-cert', '/etc/hostname'], /--server-tls-cert and --server-tls-key go together/],
  [
    ['--server-tls-cert', '/nonexistent.pem', '--server-tls-key', '/nonexistent.key'],
    /cannot read the file \(ENOENT\)/,
  ],
  [['--endpoints', 'ftp://localhost:2379'], /--endpoints: "ftp:\/\/localhost:2379" must use http/],
  [['--server-tls-client-ca', '/etc/hostname'], /--server-tls-client-ca needs HTTPS/],
  [['--server-token-file', '/nonexistent-token'], /--server-token-file \/nonexistent-token: cannot read the file/],
  [['--server-token-file', '/dev/null'], /--server-token-file \/dev\/null is empty/],
  [['--store', 'ftp://x/y'], /unknown store scheme/],
  [['--store', 'file:///a', '--store', 'file:///b'], /--store is given more than once/],
  [['--spool-max-bytes', '1Mi', '--spool-max-bytes', '2Mi'], /--spool-max-bytes is given more than once/],
  [['--temp-dir', '/proc/etcd-snapshot-tmp'], /--temp-dir \/proc\/etcd-snapshot-tmp is under \/proc/],
  [['--store', 'file:///sys/etcd-backups'], /--store \/sys\/etcd-backups is under \/sys/],
  [['--store'], /--store needs a value/],
  [
    ['--data-dir', '/tmp/etcd-data', '--name', 'a', '--initial-cluster', 'a=http://127.0.0.1:1,b=http://127.0.0.1:2'],
    /give --service-endpoints \(client URLs that reach the other members\)/,
  ],
  [['--data-dir', '/proc/etcd-data'], /--data-dir \/proc\/etcd-data is under \/proc/],
  [['--defragmentation-schedule', 'nightly'], /--defragmentation-schedule "nightly" is not a cron schedule/],
  [['--defrag-min-reclaim', 'lots'], /--defrag-min-reclaim "lots" is not a size/],
  [['--etcd-defrag-timeout', '0'], /--etcd-defrag-timeout must be more than 0/],
  [['--alarm-check-period', 'often'], /--alarm-check-period "often" is not a duration/],
  [
    ['--alarm-nospace-threshold', '1.5'],
    /--alarm-nospace-threshold "?1.5"? must be a share of the quota between 0 and 1/,
  ],
  [['--no-such-flag'], /unknown argument --no-such-flag/],
  [['--spool_dir', '/tmp/x'], /unknown argument --spool_dir \(did you mean --spool-dir\?\)/],
])('run %j: a one-line error and exit 2 before any work', async (args, message) => {
  const spool = join(dir, `spool-${(args as string[]).join('').replace(/\W/g, '')}`);
  const store = (args as string[]).includes('--store') ? [] : ['--store', `file://${join(dir, 'store')}`];
  const result = await runProgram('etcd-snapshot', ['run', ...store, '--spool-dir', spool, ...(args as string[])]);
  expect(result.code).toBe(2);
  expect(result.stderr.trim().split('\n')).toHaveLength(1);
  // Not a terminal: the error is a JSON line, as every other log line.
  expect(JSON.parse(result.stderr)).toMatchObject({ level: 'error', msg: expect.stringMatching(message) });
  await expect(readdir(spool)).rejects.toThrow(/ENOENT/);
});
