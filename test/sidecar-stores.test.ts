/**
 * The stores ebr has beside S3, GCS and ABS, end to end as ebr's pods name them: `etcd-snapshot run
 * --storage-provider Swift|OSS|ECS|OCS` with ebr's credential folders or variables takes full and delta snapshots
 * that etcd-restore restores exactly, and etcd-copy-backups carries them to S3 and back. Swift is the real one
 * (behind the Keystone v3 test server), OSS the OSS test server, ECS and OCS the S3 test server.
 */

import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type Etcd3, listSnapshots, openStore } from '@etcd-steward/core';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type OssTarget, startOssTarget } from '../packages/core/test/store/oss-target.js';
import { type S3Target, startS3Target } from '../packages/core/test/store/s3-target.js';
import { type SwiftTarget, startSwiftTarget } from '../packages/core/test/store/swift-target.js';
import { ebrStoreDir } from './fixtures.js';
import { restoreAndFingerprint } from './restore-program.js';
import { runProgram } from './run-program.js';
import { type KeystoneServer, startKeystone } from './servers/keystone-server.js';
import { firstDelta, keyspaceOnceStored, startSidecar, startWriter } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/** The parts of the ali-oss SDK that write a multipart upload, as ebr writes every OSS snapshot. */
interface OssClient {
  initMultipartUpload(name: string): Promise<{ uploadId: string }>;
  uploadPart(
    name: string,
    id: string,
    part: number,
    data: Buffer,
    start: number,
    end: number,
  ): Promise<{ etag: string }>;
  completeMultipartUpload(name: string, id: string, parts: { number: number; etag: string }[]): Promise<unknown>;
}
// From core's dependencies: the tests' own package does not list the SDK.
const OSS = createRequire(new URL('../packages/core/package.json', import.meta.url))('ali-oss') as new (
  options: Record<string, unknown>,
) => OssClient;

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

  it("restores the store ebr v0.23 wrote, laid out in each as ebr lays it out (Swift: the full snapshot as ebr's segments and manifest)", async () => {
    const objects = (await readdir(join(ebrStoreDir, 'v2'))).sort();
    const prefix = 'ebr-written';
    // Swift: ebr's dynamic large object for the full snapshot (segments, then an empty manifest naming them), deltas whole.
    const { storageUrl, token } = await swift.server.token();
    const swiftPut = async (key: string, body: Buffer, headers: Record<string, string> = {}) => {
      const res = await fetch(`${storageUrl}/backups/${key}`, {
        method: 'PUT',
        headers: { 'x-auth-token': token, ...headers },
        body: body as BodyInit,
      });
      expect(res.status).toBe(201);
    };
    // OSS: ebr's multipart upload for every snapshot, through the same SDK.
    const ossClient = new OSS({
      accessKeyId: oss.server.accessKeyId,
      accessKeySecret: oss.server.accessKeySecret,
      bucket: 'backups',
      endpoint: oss.server.endpoint,
    });
    // ECS and OCS: plain objects by ebr's names, as its S3 client writes them.
    const s3Store = await s3.open('');
    for (const name of objects) {
      const data = await readFile(join(ebrStoreDir, 'v2', name));
      const key = `${prefix}/v2/${name}`;
      if (name.startsWith('Full-') && data.length > 2048) {
        for (let i = 0, n = 1; i < data.length; i += 2048, n++) {
          await swiftPut(`${key}/${String(n).padStart(10, '0')}`, data.subarray(i, i + 2048));
        }
        await swiftPut(key, Buffer.alloc(0), { 'x-object-manifest': `backups/${key}` });
      } else {
        await swiftPut(key, data);
      }
      const { uploadId } = await ossClient.initMultipartUpload(key);
      const part = await ossClient.uploadPart(key, uploadId, 1, data, 0, data.length);
      await ossClient.completeMultipartUpload(key, uploadId, [{ number: 1, etag: part.etag }]);
      await s3Store.put(key, Readable.from([data]));
    }
    await s3Store.close?.();
    for (const provider of providers) {
      const res = await runProgram(
        'etcd-restore',
        [
          ...['--storage-provider', provider.name, '--store-container', 'backups', '--store-prefix', prefix],
          ...['--data-dir', at(`ebr-restored-${provider.scheme}`), '--output', 'json'],
        ],
        provider.env,
      );
      expect(res.code, `${provider.name}: ${res.stderr}`).toBe(0);
      expect(JSON.parse(res.stdout), provider.name).toMatchObject({
        revision: 9,
        keys: 6,
        snapshot: 'v2/Full-00000000-00000007-1795299379',
        deltas: ['v2/Incr-00000008-00000008-1795299383', 'v2/Incr-00000009-00000009-1795299385'],
      });
    }
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
