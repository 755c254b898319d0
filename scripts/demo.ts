// The demo README points to: a throwaway etcd and a local-directory store; a full snapshot, the sidecar
// writing delta snapshots (encrypted with a key of our own) while writes go on, the backups proven against the live
// cluster (docs/proof.md), the chain compacted into one new full snapshot, a preview of
// garbage collection, the store checked, then break the data dir (etcd-validate: restore needed), restore from it
// (etcd-validate: valid), verify.
// Runs the real programs as a user would. Run through scripts/demo, which sets up and builds first.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEtcdClient, EtcdProcess, findEtcdBinaries, freePort, keyspaceFingerprint } from '@etcd-steward/core';
import { startCluster, writeWorkload } from '@etcd-steward/testing';

const root = new URL('..', import.meta.url).pathname;
const step = (text: string) => console.log(`\n==> ${text}`);
const bin = (name: string) => join(root, `packages/${name.replace('etcd-', '')}/bin/${name}.js`);
/** Runs a program; one whose exit code is a verdict (etcd-validate) may end with `expectedCode`. */
const program = (name: string, args: string[], expectedCode = 0) => {
  console.log(`$ ${name} ${args.join(' ')}`);
  const run = spawnSync(process.execPath, [bin(name), ...args], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (run.status !== expectedCode) throw new Error(`${name} exited with ${run.status}, not ${expectedCode}`);
};
const describe = (f: { keys: number; revision: number; sha256: string }) =>
  `${f.keys} keys at revision ${f.revision}, fingerprint ${f.sha256.slice(0, 16)}…`;

const work = await mkdtemp(join(tmpdir(), 'etcd-steward-demo-'));
const store = `file://${join(work, 'store')}`;
const cluster = await startCluster();
let restored: EtcdProcess | undefined;
try {
  step(`a throwaway etcd at ${cluster.endpoints[0]}; writing 20,000 keys (puts, txns, deletes, leased keys)`);
  const client = cluster.client();
  await writeWorkload(client, { keys: 20_000, valueSize: 200 });

  step('a full snapshot into a local-directory store');
  program('etcd-snapshot', ['save', '--endpoints', cluster.endpoints[0], '--store', store]);

  step('a key file: from now on snapshots are encrypted before they are stored (docs/encryption.md)');
  const keys = join(work, 'keys');
  await writeFile(keys, `demo-1 ${randomBytes(32).toString('hex')}\n`, { mode: 0o400 });
  const key = ['--encryption-key-file', keys];
  console.log(`$ (umask 077; echo "demo-1 $(openssl rand -hex 32)" > ${keys})`);

  step('the sidecar (etcd-snapshot run) writes encrypted delta snapshots while 5,000 more keys are written');
  const sidecarArgs = [
    'run',
    ...['--endpoints', cluster.endpoints[0], '--store', store, '--delta-snapshot-period', '1s', ...key],
    ...['--spool-dir', join(work, 'spool'), '--server-host', '127.0.0.1', '--server-port', String(await freePort())],
  ];
  console.log(`$ etcd-snapshot ${sidecarArgs.join(' ')} &`);
  const sidecar = spawn(process.execPath, [bin('etcd-snapshot'), ...sidecarArgs], { stdio: 'ignore' });
  await writeWorkload(client, { keys: 5_000, valueSize: 200, seed: 2, prefix: '/later/' });
  const before = await keyspaceFingerprint(client);
  console.log(`keyspace now: ${describe(before)}`);
  await new Promise((resolve) => setTimeout(resolve, 2000));
  sidecar.kill('SIGTERM'); // it writes what it has watched as a last delta, then exits
  await once(sidecar, 'exit');
  program('etcd-snapshot', ['list', '--store', store]);

  step("proving the backups equal the live cluster: the chain restored into scratch, etcd's HashKV compared");
  program('etcd-copy-backups', ['verify', '--store', store, '--against', cluster.endpoints[0], ...key]);

  step('folding the full snapshot and the deltas into one new full snapshot (the CronJob etcd-compact)');
  program('etcd-compact', ['--store', store, '--work-dir', work, ...key]);

  step('what retention would delete (etcd-gc --dry-run, which needs no key): nothing of the newest restorable chain');
  program('etcd-gc', ['--store', store, '--keep-last', '1', '--dry-run']);

  step('checking the store: every snapshot read and checked, the chain continuous to the newest revision');
  program('etcd-copy-backups', ['verify', '--store', store, ...key]);

  step('breaking etcd: stop it and delete its data dir');
  const member = cluster.members[0];
  await member.stop();
  await rm(member.dataDir, { recursive: true, force: true });
  console.log(`deleted ${member.dataDir}`);
  program('etcd-validate', ['check', '--data-dir', member.dataDir, '--store', store], 3); // 3: restore needed

  step('restoring the data dir from the store: the compacted full snapshot, no deltas to replay');
  console.log('(verified without etcd: the sha256 it prints is read from the db file; compare it with the one above)');
  program('etcd-restore', ['--store', store, '--data-dir', member.dataDir, '--name', member.name, ...key]);
  program('etcd-validate', ['check', '--data-dir', member.dataDir, '--store', store, '--mode', 'full']);

  step('starting etcd on the restored data dir and comparing keyspaces');
  restored = await EtcdProcess.start({
    binaries: await findEtcdBinaries(),
    name: member.name,
    dataDir: member.dataDir,
    logFile: join(work, 'restored-etcd.log'),
  });
  await restored.waitHealthy();
  const after = createEtcdClient({ endpoints: [restored.clientUrl] });
  const fingerprint = await keyspaceFingerprint(after);
  after.close();
  console.log(`restored keyspace: ${describe(fingerprint)}`);
  if (JSON.stringify(fingerprint) !== JSON.stringify(before)) {
    console.error('\nFAILED: the restored keyspace differs from the original');
    process.exitCode = 1;
  } else {
    console.log('\nOK: the restored etcd has the exact keyspace and revision of the original');
  }
} finally {
  await restored?.stop();
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}
