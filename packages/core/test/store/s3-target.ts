import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type SnapStore } from '@etcd-steward/core';
import { type S3ServerOptions, type S3TestServer, startS3Server } from '../../../../test/servers/s3-server.js';

export const S3_PART_SIZE = 5 * 1024 * 1024;
/** Tests wait milliseconds, not seconds, between retries. */
export const FAST_RETRIES = { baseDelayMs: 5, maxDelayMs: 100 };

export interface S3Target {
  server: S3TestServer;
  bucket: string;
  /** Writes ebr-style credentials (a JSON file) and points AWS_APPLICATION_CREDENTIALS_JSON at it. */
  credentialsFile: string;
  /** In `bucket`, or the target's own. */
  url(prefix: string, query?: Record<string, string>, bucket?: string): string;
  open(prefix: string, query?: Record<string, string>, bucket?: string): Promise<SnapStore>;
  stop(): Promise<void>;
}

export async function startS3Target(bucket = 'backups', options: S3ServerOptions = {}): Promise<S3Target> {
  process.env.AWS_EC2_METADATA_DISABLED = 'true'; // never let the SDK's default chain reach for a metadata server
  const server = await startS3Server({ ...options, buckets: [bucket, ...(options.buckets ?? [])] });
  const dir = await mkdtemp(join(tmpdir(), 's3-creds-'));
  const credentialsFile = join(dir, 'credentials.json');
  await writeFile(
    credentialsFile,
    JSON.stringify({ accessKeyID: server.accessKeyId, secretAccessKey: server.secretAccessKey, region: server.region }),
  );
  process.env.AWS_APPLICATION_CREDENTIALS_JSON = credentialsFile;
  const url = (prefix: string, query: Record<string, string> = {}, inBucket = bucket) => {
    const params = new URLSearchParams({ endpoint: server.endpoint, partSize: String(S3_PART_SIZE), ...query });
    return `s3://${inBucket}/${prefix}?${params}`;
  };
  return {
    server,
    bucket,
    credentialsFile,
    url,
    open: (prefix, query, inBucket) => openStore(url(prefix, query, inBucket), { retry: FAST_RETRIES }),
    stop: async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
