// The store test servers as benchmark targets: fauxqs (S3), the GCS test server, azurite, or a local directory, each
// keeping its data under `dir` where it can, with the store URL and the credentials environment to reach it.

import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export interface Target {
  url: string;
  /** The store in another bucket (container) of the same server, where the provider has buckets. */
  urlIn?(bucket: string, prefix: string): string;
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startTarget(
  provider: string,
  dir: string,
  partSize: string,
  partsInFlight: string,
  buckets: string[] = [],
): Promise<Target> {
  const servers = new URL('../../test/servers/', import.meta.url);
  const query = (endpoint: string) => new URLSearchParams({ endpoint, partSize, partsInFlight }).toString();
  if (provider === 's3') {
    const { startS3Server } = await import(new URL('s3-server.ts', servers).href);
    const server = await startS3Server({ storageDir: dir, buckets: ['bench', ...buckets] });
    const credentials = join(dir, 'credentials.json');
    // ebr's S3 provider takes the server from the credentials; ours from the URL, which wins
    const { accessKeyId: accessKeyID, secretAccessKey, region, endpoint } = server;
    await writeFile(
      credentials,
      JSON.stringify({ accessKeyID, secretAccessKey, region, endpoint, s3ForcePathStyle: true }),
    );
    return {
      url: `s3://bench/etcd?${query(server.endpoint)}`,
      urlIn: (bucket, prefix) => `s3://${bucket}/${prefix}?${query(server.endpoint)}`,
      env: { AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
      stop: () => server.stop(),
    };
  }
  if (provider === 'gcs') {
    const { startGcsServer } = await import(new URL('gcs-server.ts', servers).href);
    const server = await startGcsServer();
    server.createBucket('bench');
    return { url: `gs://bench/etcd?${query(server.endpoint)}`, env: {}, stop: () => server.stop() };
  }
  if (provider === 'azure') {
    const { startAzurite } = await import(new URL('azurite-server.ts', servers).href);
    const server = await startAzurite({ location: dir });
    // The Azure SDK is core's dependency: resolve it from there, to create the container the store expects.
    const { ContainerClient, StorageSharedKeyCredential } = createRequire(
      new URL('../../packages/core/package.json', import.meta.url),
    )('@azure/storage-blob');
    await new ContainerClient(
      `${server.endpoint}/bench`,
      new StorageSharedKeyCredential(server.account, server.accountKey),
    ).create();
    const credentials = join(dir, 'credentials.json');
    await writeFile(credentials, JSON.stringify({ storageAccount: server.account, storageKey: server.accountKey }));
    return {
      url: `azblob://bench/etcd?${query(server.endpoint)}`,
      env: { AZURE_APPLICATION_CREDENTIALS_JSON: credentials },
      stop: () => server.stop(),
    };
  }
  if (provider === 'local') return { url: `file://${dir}`, env: {}, stop: async () => {} };
  throw new Error(`unknown provider ${provider}: use s3, gcs, azure, local`);
}
