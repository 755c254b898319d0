import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type SnapStore } from '@etcd-steward/core';
import { type OssTestServer, startOssServer } from '../../../../test/servers/oss-server.js';
import { FAST_RETRIES } from './s3-target.js';

/** OSS's smallest part but the last, so that multi-part tests stay small. */
export const OSS_PART_SIZE = 100 * 1024;

export interface OssTarget {
  server: OssTestServer;
  bucket: string;
  /** ebr's credentials as a directory of one-value files (ALICLOUD_APPLICATION_CREDENTIALS). */
  credentialsDir: string;
  url(prefix: string, query?: Record<string, string>): string;
  /** Opens a store, its endpoint `endpoint` (default the server's, from the credential files). */
  open(prefix: string, query?: Record<string, string>): Promise<SnapStore>;
  stop(): Promise<void>;
}

export async function startOssTarget(bucket = 'backups'): Promise<OssTarget> {
  const server = await startOssServer();
  server.createBucket(bucket);
  const credentialsDir = await mkdtemp(join(tmpdir(), 'oss-creds-'));
  await writeFile(join(credentialsDir, 'storageEndpoint'), `${server.endpoint}\n`);
  await writeFile(join(credentialsDir, 'accessKeyID'), server.accessKeyId);
  await writeFile(join(credentialsDir, 'accessKeySecret'), server.accessKeySecret);
  const url = (prefix: string, query: Record<string, string> = {}) =>
    `oss://${bucket}/${prefix}?${new URLSearchParams({ partSize: String(OSS_PART_SIZE), ...query })}`;
  return {
    server,
    bucket,
    credentialsDir,
    url,
    open: (prefix, query) =>
      openStore(url(prefix, query), {
        retry: FAST_RETRIES,
        env: { ALICLOUD_APPLICATION_CREDENTIALS: credentialsDir },
      }),
    stop: async () => {
      await server.stop();
      await rm(credentialsDir, { recursive: true, force: true });
    },
  };
}
