import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createEtcdClient, type Etcd3, EtcdProcess, findEtcdBinaries, freePort } from '@etcd-steward/core';
import { expect } from 'vitest';
import { runProgram } from './run-program.js';

/** A one-member etcd that can be stopped and started again on its data dir, at the same URLs. */
export async function restartableMember(dir: string) {
  await mkdir(dir, { recursive: true });
  const binaries = await findEtcdBinaries();
  const ports = { clientPort: await freePort(), peerPort: await freePort() };
  const dataDir = join(dir, 'member');
  let member: EtcdProcess | undefined;
  let client: Etcd3 | undefined;
  return {
    dataDir,
    peerUrl: `http://127.0.0.1:${ports.peerPort}`,
    async start(): Promise<Etcd3> {
      member = await EtcdProcess.start({ binaries, name: 'm0', dataDir, logFile: join(dir, 'etcd.log'), ...ports });
      await member.waitHealthy();
      client = createEtcdClient({ endpoints: [member.clientUrl] });
      return client;
    },
    get endpoint() {
      return `http://127.0.0.1:${ports.clientPort}`;
    },
    async stop() {
      client?.close();
      await member?.stop();
      member = undefined;
    },
  };
}

export type Member = Awaited<ReturnType<typeof restartableMember>>;

/** `count` puts of `<prefix><i>`. */
export async function putMany(client: Etcd3, prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await client.put(`${prefix}${i}`).value(`${prefix}${i}-value`).exec();
}

/** etcd-restore into the member's own data dir (stopped), as the runbook does; extra flags after the member's. */
export async function restoreMember(member: Member, store: string, extra: string[]) {
  const res = await runProgram('etcd-restore', [
    ...['--store', store, '--data-dir', member.dataDir, '--force', '--name', 'm0'],
    ...['--initial-advertise-peer-urls', member.peerUrl, '--initial-cluster-token', 'etcd-steward', '--output', 'json'],
    ...extra,
  ]);
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout);
}
