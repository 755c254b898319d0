// The image's smoke test, run by scripts/image in the image's file system (argument: its root): every program's
// --version and --help, then a local etcd started from the image, a snapshot of it and a restore, checked with
// etcd-validate, all as the image's non-root user, as a container would run them.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { freePort } from '@etcd-steward/core';

const root = process.argv[2];
if (!root) throw new Error('give the image root file system: node scripts/image-smoke.ts DIR');
const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/home/steward' };
const inImage = (args: string[]) => ['--userspec=10001:10001', root, ...args];
const programs = ['etcd-snapshot', 'etcd-restore', 'etcd-validate', 'etcd-compact', 'etcd-gc', 'etcd-copy-backups'];

function run(args: string[], expected = 0): string {
  const result = spawnSync('/usr/sbin/chroot', inImage(args), { env, encoding: 'utf8' });
  if (result.status !== expected) {
    throw new Error(`${args.join(' ')} exited ${result.status}, not ${expected}: ${result.stderr}${result.stdout}`);
  }
  return result.stdout;
}

// The image's processes need /proc and /dev, which a container runtime provides.
for (const dir of ['proc', 'dev']) {
  mkdirSync(`${root}/${dir}`, { recursive: true });
  spawnSync('mount', ['--bind', `/${dir}`, `${root}/${dir}`], { stdio: 'inherit' });
}
let etcd: ChildProcess | undefined;
try {
  for (const program of programs) {
    const version = run([program, '--version']).trim();
    const help = run([program, '--help']);
    if (!help.includes('--version')) throw new Error(`${program} --help lists no --version`);
    console.log(`${program} ${version}: --version and --help`);
  }
  const client = await freePort();
  const peer = await freePort();
  etcd = spawn(
    '/usr/sbin/chroot',
    inImage([
      'etcd',
      '--data-dir=/tmp/smoke-etcd',
      `--listen-client-urls=http://127.0.0.1:${client}`,
      `--advertise-client-urls=http://127.0.0.1:${client}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=default=http://127.0.0.1:${peer}`,
    ]),
    { env, stdio: 'ignore' },
  );
  const endpoint = `--endpoints=http://127.0.0.1:${client}`;
  for (
    let tries = 0;
    spawnSync('/usr/sbin/chroot', inImage(['etcdctl', endpoint, 'endpoint', 'health'])).status !== 0;
    tries++
  ) {
    if (tries > 100) throw new Error("the image's etcd did not become healthy in 30 s");
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  for (let i = 0; i < 20; i++) run(['etcdctl', endpoint, 'put', `/smoke/${i}`, `value ${i}`]);
  console.log(run(['etcd-snapshot', 'save', endpoint, '--store=file:///tmp/smoke-store']).trim());
  console.log(run(['etcd-restore', '--store=file:///tmp/smoke-store', '--data-dir=/tmp/smoke-restored']).trim());
  console.log(run(['etcd-validate', 'check', '--data-dir=/tmp/smoke-restored']).trim());
  console.log('image smoke test passed');
} finally {
  etcd?.kill('SIGTERM');
  if (etcd && etcd.exitCode === null) await new Promise((resolve) => etcd?.once('exit', resolve));
  for (const dir of ['proc', 'dev']) spawnSync('umount', [`${root}/${dir}`]);
}
