// The demo README points to: a throwaway etcd and a local-directory store; snapshot, break, restore, verify.
// Runs the real programs as a user would. Run through scripts/demo, which sets up and builds first.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEtcdClient, EtcdProcess, findEtcdBinaries, keyspaceFingerprint } from '@etcd-steward/core';
import { startCluster, writeWorkload } from '@etcd-steward/core/testing';

const root = new URL('..', import.meta.url).pathname;
const step = (text: string) => console.log(`\n==> ${text}`);
const program = (name: string, args: string[]) => {
  console.log(`$ ${name} ${args.join(' ')}`);
  execFileSync(process.execPath, [join(root, `packages/${name.replace('etcd-', '')}/bin/${name}.js`), ...args], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
};

const work = await mkdtemp(join(tmpdir(), 'etcd-steward-demo-'));
const store = `file://${join(work, 'store')}`;
const cluster = await startCluster();
let restored: EtcdProcess | undefined;
try {
  step(`a throwaway etcd at ${cluster.endpoints[0]}; writing 20,000 keys (puts, txns, deletes, leased keys)`);
  const client = cluster.client();
  await writeWorkload(client, { keys: 20_000, valueSize: 200 });
  const before = await keyspaceFingerprint(client);
  console.log(
    `keyspace: ${before.keys} keys at revision ${before.revision}, fingerprint ${before.sha256.slice(0, 16)}…`,
  );

  step('full snapshot into a local-directory store');
  program('etcd-snapshot', ['save', '--endpoints', cluster.endpoints[0], '--store', store]);
  program('etcd-snapshot', ['list', '--store', store]);

  step('breaking etcd: stop it and delete its data dir');
  const member = cluster.members[0];
  await member.stop();
  await rm(member.dataDir, { recursive: true, force: true });
  console.log(`deleted ${member.dataDir}`);

  step('restoring the data dir from the store');
  program('etcd-restore', ['--store', store, '--data-dir', member.dataDir, '--name', member.name]);

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
  console.log(
    `keyspace: ${fingerprint.keys} keys at revision ${fingerprint.revision}, fingerprint ${fingerprint.sha256.slice(0, 16)}…`,
  );
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
