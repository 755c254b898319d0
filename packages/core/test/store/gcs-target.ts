import { openStore, type SnapStore } from '@etcd-steward/core';
import { type GcsTestServer, startGcsServer } from '../../../../test/servers/gcs-server.js';
import { FAST_RETRIES } from './s3-target.js';

/** The smallest chunk GCS allows, so that multi-chunk tests stay small. */
export const GCS_PART_SIZE = 256 * 1024;

export interface GcsTarget {
  server: GcsTestServer;
  bucket: string;
  url(prefix: string, query?: Record<string, string>): string;
  open(prefix: string, query?: Record<string, string>): Promise<SnapStore>;
  stop(): Promise<void>;
}

export async function startGcsTarget(bucket = 'backups'): Promise<GcsTarget> {
  delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  const server = await startGcsServer();
  server.createBucket(bucket);
  const url = (prefix: string, query: Record<string, string> = {}) => {
    const params = new URLSearchParams({ endpoint: server.endpoint, partSize: String(GCS_PART_SIZE), ...query });
    return `gs://${bucket}/${prefix}?${params}`;
  };
  return {
    server,
    bucket,
    url,
    open: (prefix, query) => openStore(url(prefix, query), { retry: FAST_RETRIES }),
    stop: () => server.stop(),
  };
}
