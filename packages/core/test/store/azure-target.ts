import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContainerClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { openStore, type SnapStore } from '@etcd-steward/core';
import { type AzuriteTestServer, startAzurite } from '../../../../test/servers/azurite-server.js';
import { FAST_RETRIES } from './s3-target.js';

export const AZURE_PART_SIZE = 1024 * 1024;

export interface AzureTarget {
  server: AzuriteTestServer;
  container: string;
  /** ebr-style credentials directory (storageAccount, storageKey), set as AZURE_APPLICATION_CREDENTIALS. */
  credentialsDir: string;
  client: ContainerClient;
  url(prefix: string, query?: Record<string, string>): string;
  open(prefix: string, query?: Record<string, string>): Promise<SnapStore>;
  stop(): Promise<void>;
}

export async function startAzureTarget(container = 'backups'): Promise<AzureTarget> {
  const server = await startAzurite();
  const credentialsDir = await mkdtemp(join(tmpdir(), 'azure-creds-'));
  await writeFile(join(credentialsDir, 'storageAccount'), server.account);
  await writeFile(join(credentialsDir, 'storageKey'), server.accountKey);
  process.env.AZURE_APPLICATION_CREDENTIALS = credentialsDir;
  const client = new ContainerClient(
    `${server.endpoint}/${container}`,
    new StorageSharedKeyCredential(server.account, server.accountKey),
  );
  await client.create();
  const url = (prefix: string, query: Record<string, string> = {}) => {
    const params = new URLSearchParams({ endpoint: server.endpoint, partSize: String(AZURE_PART_SIZE), ...query });
    return `azblob://${container}/${prefix}?${params}`;
  };
  return {
    server,
    container,
    credentialsDir,
    client,
    url,
    open: (prefix, query) => openStore(url(prefix, query), { retry: FAST_RETRIES }),
    stop: async () => {
      await server.stop();
      await rm(credentialsDir, { recursive: true, force: true });
    },
  };
}
