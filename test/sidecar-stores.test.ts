/**
 * The stores ebr has beside S3, GCS and ABS, end to end as ebr's pods name them: `etcd-snapshot run
 * --storage-provider Swift|OSS|ECS|OCS` with ebr's credential folders or variables takes full and delta snapshots
 * that etcd-restore restores exactly, and etcd-copy-backups carries them to S3 and back. Swift is the real one
 * (behind the Keystone v3 test server), OSS the OSS test server, ECS and OCS the S3 test server.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Etcd3, listSnapshots, openStore } from '@etcd-steward/core';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type OssTarget, startOssTarget } from '../packages/core/test/store/oss-target.js';
import { type S3Target, startS3Target } from '../packages/core/test/store/s3-target.js';
import { type SwiftTarget, startSwiftTarget } from '../packages/core/test/store/swift-target.js';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram } from './run-program.js';
import { type KeystoneServer, startKeystone } from './servers/keystone-server.js';
import { firstDelta, keyspaceOnceStored, startSidecar, startWriter } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-stores-');

interface Provider {
  /** ebr's --storage-provider value. */
  name: string;
  scheme: string;
  /** ebr's credentials: variables, some naming a folder of one-value files. */
  env: NodeJS.ProcessEnv;
}

/** A folder of one-value files, as Kubernetes mounts a Secret. */
async function secret(name: string, values: Record<string, string>): Promise<string> {
  const dir = at('secrets', name);
  await mkdir(dir, { recursive: true });
  for (const [key, value] of Object.entries(values)) await writeFile(join(dir, key), value);
  return dir;
}

describe('etcd-snapshot run with --storage-provider Swift, OSS, ECS and OCS (ebr credentials), then etcd-restore', () => {
  let cluster: TestCluster;
  let client: Etcd3;
  let s3: S3Target;
  let swift: SwiftTarget;
  let keystone: KeystoneServer;
  let oss: OssTarget;
  const providers: Provider[] = [];

  beforeAll(async () => {
    [cluster, s3, swift, oss] = await Promise.all([
      startCluster(),
      startS3Target(),
      startSwiftTarget(),
      startOssTarget(),
    ]);
    client = cluster.client();
    keystone = await startKeystone({
      swift: swift.server,
      users: [
        { name: 'etcd', domain: 'Default', password: 'etcd-password', project: { name: 'backups', domain: 'Default' } },
      ],
    });
    const { server } = s3;
    providers.push(
      {
        name: 'Swift',
        scheme: 'swift',
        env: {
          OPENSTACK_APPLICATION_CREDENTIALS: await secret('swift', {
            authURL: keystone.authUrl,
            domainName: 'Default',
            tenantName: 'backups',
            username: 'etcd',
            password: 'etcd-password',
            region: keystone.region,
          }),
        },
      },
      {
        name: 'OSS',
        scheme: 'oss',
        env: {
          ALICLOUD_APPLICATION_CREDENTIALS: await secret('oss', {
            storageEndpoint: oss.server.endpoint,
            accessKeyID: oss.server.accessKeyId,
            accessKeySecret: oss.server.accessKeySecret,
          }),
        },
      },
      {
        name: 'ECS',
        scheme: 'ecs',
        env: {
          ECS_ENDPOINT: server.endpoint,
          ECS_ACCESS_KEY_ID: server.accessKeyId,
          ECS_SECRET_ACCESS_KEY: server.secretAccessKey,
        },
      },
      {
        name: 'OCS',
        scheme: 'ocs',
        env: {
          OPENSHIFT_APPLICATION_CREDENTIALS: await secret('ocs', {
            endpoint: server.endpoint,
            region: server.region,
            accessKeyID: server.accessKeyId,
            secretAccessKey: server.secretAccessKey,
            disableSSL: 'true',
          }),
        },
      },
    );
  }, 180_000);

  afterAll(async () => {
    await Promise.all([cluster?.stop(), keystone?.stop(), s3?.stop(), swift?.stop(), oss?.stop()]);
  });

  for (const name of ['Swift', 'OSS', 'ECS', 'OCS']) {
    it(`${name}: full and delta snapshots restore exactly; copied to S3 and back, the same snapshots`, async () => {
      const provider = providers.find((p) => p.name === name)!;
      const prefix = `etcd-${provider.scheme}`;
      const sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: undefined,
        dir: at(`sidecar-${provider.scheme}`),
        args: ['--storage-provider', name, '--store-container', 'backups', '--store-prefix', prefix],
        env: { ...process.env, ...provider.env },
      });
      onTestFinished(() => sidecar.kill());
      const writer = startWriter(client, { concurrency: 8 });
      await firstDelta(sidecar.url);
      expect((await fetch(`${sidecar.url}/snapshot/full`, { method: 'POST' })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await writer.stop();
      const source = await keyspaceOnceStored(client, sidecar.url);
      expect(await sidecar.stop()).toBe(0);

      const url = `${provider.scheme}://backups/${prefix}`;
      const { result, fingerprint } = await restoreAndFingerprint(
        url,
        at(),
        `restored-${provider.scheme}`,
        [],
        provider.env,
      );
      expect(fingerprint).toEqual(source);
      expect(result.snapshot).toMatch(/^v2\/Full-/);
      expect(result.deltas.length).toBeGreaterThan(0);

      const there = s3.url(`copied-${provider.scheme}`);
      const back = `${provider.scheme}://backups/${prefix}-back`;
      for (const [from, to] of [
        [url, there],
        [there, back],
      ]) {
        const copied = await runProgram(
          'etcd-copy-backups',
          ['--from', from, '--to', to, '--output', 'json'],
          provider.env,
        );
        expect(copied.code, copied.stderr).toBe(0);
      }
      const names = async (storeUrl: string) => {
        const store = await openStore(storeUrl, { env: { ...process.env, ...provider.env } });
        try {
          return (await listSnapshots(store)).map((e) => `${e.name} ${e.size}`);
        } finally {
          await store.close?.();
        }
      };
      const original = await names(url);
      expect(original.length).toBeGreaterThan(1);
      expect(await names(there)).toEqual(original);
      expect(await names(back)).toEqual(original);
    });
  }
});
