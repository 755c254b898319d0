import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProgram, startProgram } from './run-program.js';
import { type SidecarProcess, startSidecar, waitFor } from './sidecar-helpers.js';
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

  it('given to save on its command line, is not in the command line of the save while it runs (which runs without TurboFan and with one malloc arena)', async () => {
    // An etcd that takes connections and never answers: the save waits, and its process can be read.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket)).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const save = startProgram('etcd-snapshot', [
      'save',
      ...['--endpoints', `http://127.0.0.1:${(silent.address() as AddressInfo).port}`],
      ...['--store', `file://${path('silent-store')}`, '--user', 'root', '--password', 'root-pw-4711'],
    ]);
    try {
      const cmdline = await waitFor('the save to start again with its settings', async () => {
        const args = (await readFile(`/proc/${save.pid}/cmdline`, 'utf8')).split('\0');
        return args.includes('--max-opt=2') ? args : undefined;
      });
      expect(cmdline).toContain('save');
      expect(cmdline.join(' ')).not.toContain('root-pw-4711');
      expect((await readFile(`/proc/${save.pid}/environ`, 'utf8')).split('\0')).toContain('MALLOC_ARENA_MAX=1');
    } finally {
      save.kill('SIGKILL');
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it.each([[['--user', 'root', '--password', 'root-pw-4711']], [['--user=root:root-pw-4711']]])(
    'given to etcd-validate bootstrap as %j, is not in its command line while it asks the cluster',
    async (flags) => {
      // Members that take connections and never answer: bootstrap waits on them, and its process can be read.
      const connected: Socket[] = [];
      const silent = createServer((socket) => connected.push(socket)).listen(0, '127.0.0.1');
      await once(silent, 'listening');
      const endpoint = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const bootstrap = startProgram('etcd-validate', [
        'bootstrap',
        ...['--data-dir', path('validate-data'), '--store', `file://${path('validate-store')}`],
        ...['--name', 'a', '--initial-advertise-peer-urls', 'http://127.0.0.1:2380'],
        ...['--initial-cluster', 'a=http://127.0.0.1:2380,b=http://127.0.0.1:2390', '--endpoints', endpoint],
        ...flags,
      ]);
      try {
        // It connects only once it has loaded, which is after any start again.
        await waitFor('bootstrap to ask the cluster', async () => connected.length > 0 || undefined);
        const cmdline = (await readFile(`/proc/${bootstrap.pid}/cmdline`, 'utf8')).split('\0');
        expect(cmdline).toContain('bootstrap');
        expect(cmdline).toContain('--user=root');
        expect(cmdline.join(' ')).not.toContain('root-pw-4711');
        expect((await readFile(`/proc/${bootstrap.pid}/environ`, 'utf8')).split('\0')).toContain(
          'ETCD_STEWARD_PASSWORD=root-pw-4711',
        );
      } finally {
        bootstrap.kill('SIGKILL');
        for (const socket of connected) socket.destroy();
        silent.close();
      }
    },
  );

  it.each([
    ['etcd-snapshot', ['list', '--store', 'file:///nonexistent-store'], '--password'],
    ['etcd-validate', ['check', '--data-dir', '/nonexistent-data-dir'], '--password'],
  ])('%s %j, which takes no password, still refuses --password as an unknown argument', async (program, args, flag) => {
    const result = await runProgram(program, [...args, '--password', 'root-pw-4711']);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr.trim())).toMatchObject({
      level: 'error',
      msg: `unknown argument ${flag} (see --help)`,
    });
    expect(result.stderr).not.toContain('root-pw-4711');
  });
});
