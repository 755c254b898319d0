import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProgram } from './run-program.js';
import { type SidecarProcess, startSidecar } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);

describe('the etcd password (etcd with auth enabled)', () => {
  const path = tempDir('etcd-password-');
  let cluster: TestCluster;
  let sidecar: SidecarProcess | undefined;

  beforeAll(async () => {
    cluster = await startCluster();
    const etcdctl = (...args: string[]) =>
      run('etcdctl', ['--endpoints', cluster.endpoints[0], ...args], { env: { ...process.env, ETCDCTL_API: '3' } });
    await etcdctl('user', 'add', 'root:root-pw-4711');
    await etcdctl('user', 'grant-role', 'root', 'root');
    await etcdctl('auth', 'enable');
  });

  afterAll(async () => {
    await sidecar?.stop();
    await cluster?.stop();
  });

  it('comes from --password-file', async () => {
    await writeFile(path('password'), 'root-pw-4711\n');
    const save = (passwordFile: string) =>
      runProgram('etcd-snapshot', [
        'save',
        ...['--endpoints', cluster.endpoints[0], '--store', `file://${path('store')}`, '--temp-dir', path()],
        ...['--user', 'root', '--password-file', passwordFile],
      ]);
    expect((await save(path('password'))).code).toBe(0);
    const missing = await save(path('no-such-file'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--password-file .*no-such-file: cannot read the file/);
  });

  it.each([[['--user', 'root', '--password', 'root-pw-4711']], [['--user=root:root-pw-4711']]])(
    "given as %j, is not in the running sidecar's command line",
    async (flags) => {
      await sidecar?.stop();
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${path('sidecar-store')}`,
        dir: path(`sidecar-${flags.length}`),
        args: flags,
      });
      const cmdline = (await readFile(`/proc/${sidecar.child.pid}/cmdline`, 'utf8')).split('\0');
      expect(cmdline).toContain('run');
      expect(cmdline.join(' ')).not.toContain('root-pw-4711');
      // It still reaches etcd as root: the leader's sidecar takes its first full snapshot.
      const status = await fetch(`${sidecar.url}/healthz`);
      expect(status.ok).toBe(true);
    },
  );
});
