// The image's smoke test, run by scripts/image in the image's file system (argument: its root): every program's
// --version and --help, then a local etcd started from the image, a snapshot of it and a restore, checked with
// etcd-validate, all as the image's non-root user, as a container would run them; then the entry point, etcdbrctl,
// with the sidecar arguments etcd-druid renders, as druid's pod runs it (uid 65532, no --spool-dir), against an S3
// and a Kubernetes API test server on this machine.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { freePort, listSnapshots, openStore } from '@etcd-steward/core';
import { makeTestCertificates } from '@etcd-steward/testing';
import { startKubeApiServer } from '../test/servers/kube-apiserver.ts';
import { startS3Server } from '../test/servers/s3-server.ts';

const root = process.argv[2];
if (!root) throw new Error('give the image root file system: node scripts/image-smoke.ts DIR');
const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/home/steward' };
const inImage = (args: string[]) => ['--userspec=10001:10001', root, ...args];
const programs = [
  'etcdbrctl',
  'etcd-snapshot',
  'etcd-restore',
  'etcd-validate',
  'etcd-compact',
  'etcd-gc',
  'etcd-copy-backups',
];

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
  // bootstrap takes etcd's lock on the db with the image's util-linux flock (exit 2 without it)
  console.log(
    run([
      'etcd-validate',
      'bootstrap',
      '--data-dir=/tmp/smoke-restored',
      '--store=file:///tmp/smoke-store',
      '--dry-run',
    ]).trim(),
  );
  await druidSidecar(`http://127.0.0.1:${client}`);
  console.log('image smoke test passed');
} finally {
  etcd?.kill('SIGTERM');
  if (etcd && etcd.exitCode === null) await new Promise((resolve) => etcd?.once('exit', resolve));
  for (const dir of ['proc', 'dev']) spawnSync('umount', [`${root}/${dir}`]);
}

/** `etcdbrctl server` with druid's arguments (its etcd, port and paths aside): a full snapshot in gzip, then SIGTERM. */
async function druidSidecar(endpoint: string): Promise<void> {
  const s3 = await startS3Server({ buckets: ['default.bkp'] });
  mkdirSync(`${root}/tmp/smoke-kube`, { recursive: true });
  const kube = await startKubeApiServer(await makeTestCertificates(`${root}/tmp/smoke-kube`));
  try {
    await kube.writeKubeconfig(`${root}/tmp/smoke-kube/kubeconfig`);
    spawnSync('chmod', ['-R', 'a+rX', `${root}/tmp/smoke-kube`]);
    const secret = `${root}/tmp/smoke-etcd-backup`;
    mkdirSync(secret, { recursive: true });
    const fields = { accessKeyID: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, region: s3.region };
    for (const [name, value] of Object.entries({ ...fields, endpoint: s3.endpoint, s3ForcePathStyle: 'true' })) {
      writeFileSync(`${secret}/${name}`, value, { mode: 0o644 });
    }
    // druid's volume for etcd's data, owned by the pod's user through fsGroup.
    mkdirSync(`${root}/var/etcd/data`, { recursive: true });
    chownSync(`${root}/var/etcd/data`, 65532, 65532);
    const port = await freePort();
    const args = readFileSync(new URL('../test/fixtures/druid/args-server-v0.37.1.txt', import.meta.url), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((arg) => arg.replace(/http:\/\/etcd-test-(local|client):2379/, endpoint).replace(/=8080$/, `=${port}`));
    const podEnv = {
      PATH: env.PATH,
      POD_NAME: 'etcd-test-0',
      POD_NAMESPACE: 'test-ns',
      STORAGE_CONTAINER: 'default.bkp',
      AWS_APPLICATION_CREDENTIALS: '/tmp/smoke-etcd-backup',
      AWS_EC2_METADATA_DISABLED: 'true',
      KUBECONFIG: '/tmp/smoke-kube/kubeconfig',
      ETCD_STEWARD_SERVER_HOST: '127.0.0.1',
    };
    // The image's entry point, as a pod with only args runs it.
    const sidecar = spawn('/usr/sbin/chroot', ['--userspec=65532:65532', root, 'etcdbrctl', ...args], {
      env: podEnv,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => sidecar.once('exit', resolve));
    const store = await openStore('s3://default.bkp/tmp', {
      env: { ...process.env, AWS_APPLICATION_CREDENTIALS: secret, AWS_EC2_METADATA_DISABLED: 'true' },
    });
    try {
      for (let tries = 0; ; tries++) {
        const full = (await listSnapshots(store)).find((entry) => entry.kind === 'Full');
        if (full) {
          if (full.compression !== '.gz') throw new Error(`etcdbrctl server wrote ${full.name}, not gzip`);
          console.log(`etcdbrctl server (druid's arguments, uid 65532): ${full.name}`);
          break;
        }
        if (sidecar.exitCode !== null) throw new Error(`etcdbrctl server exited with ${sidecar.exitCode}`);
        if (tries > 200) throw new Error('etcdbrctl server took no full snapshot in 60 s');
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    } finally {
      await store.close?.();
      sidecar.kill('SIGTERM');
    }
    const code = await exited;
    if (code !== 0) throw new Error(`etcdbrctl server exited with ${code} on SIGTERM`);
  } finally {
    await kube.stop();
    await s3.stop();
  }
}
