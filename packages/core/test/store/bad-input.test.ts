/**
 * Configuration mistakes: each is reported before any work, as a UsageError (exit code 2) that names the
 * store and the fix; secrets never appear in what is printed.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { openStore, UsageError } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AzureTarget, startAzureTarget } from './azure-target.js';
import { type GcsTarget, startGcsTarget } from './gcs-target.js';
import { FAST_RETRIES, type S3Target, startS3Target } from './s3-target.js';

/** Opens the store, expecting a UsageError; returns it with everything a log line could print of it. */
async function usageError(url: string): Promise<{ error: UsageError; printed: string }> {
  const error = await openStore(url, { retry: FAST_RETRIES }).then(
    () => {
      throw new Error(`opened ${url}`);
    },
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(UsageError);
  expect((error as UsageError).exitCode).toBe(2);
  return { error: error as UsageError, printed: `${(error as Error).message}\n${inspect(error, { depth: 10 })}` };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'bad-input-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('malformed store URLs', () => {
  it.each([
    ['not a url', 'is not a URL'],
    ['ftp://host/x', 'unknown store scheme'],
    ['s3:///prefix', 'names no bucket'],
    ['s3://bucket/p?regoin=eu-west-1', 'unknown option regoin'],
    ['s3://bucket/p?partSize=1MiB&endpoint=http://127.0.0.1:1', 'partSize must be at least 5 MiB'],
    ['gs://bucket/p?partSize=300KiB&endpoint=http://127.0.0.1:1', 'multiple of 256 KiB'],
    ['azblob://c/p?partsInFlight=0', 'partsInFlight=0'],
    ['s3://bucket/p?endpoint=minio:9000', 'not an http(s) URL'],
    ['swift://c/p?partSize=512KiB', 'partSize must be at least 1 MiB'],
    ['swift://c/p?interface=private', 'interface=private must be one of public, internal, admin'],
    ['oss://Bad_Bucket/p', 'is not an OSS bucket name'],
    ['oss://bucket/p?endpoint=http://127.0.0.1:1&partSize=10KiB', 'partSize must be at least 100 KiB'],
    ['ecs://bucket/p?regoin=x', 'unknown option regoin; known: endpoint, partSize'],
    ['ocs://bucket/p', 'no OCS credentials: set OPENSHIFT_APPLICATION_CREDENTIALS'],
  ])('%s', async (url, expected) => {
    const { error } = await usageError(url);
    expect(error.message).toContain(expected);
  });
});

describe('S3', () => {
  let target: S3Target;
  beforeAll(async () => {
    target = await startS3Target();
  });
  afterAll(async () => {
    process.env.AWS_APPLICATION_CREDENTIALS_JSON = target?.credentialsFile;
    await target?.stop();
  });

  it('wrong credentials: says so, and never prints the secret', async () => {
    const secret = `S3CR3T${randomBytes(16).toString('hex')}`;
    const file = join(dir, 'wrong-aws.json');
    await writeFile(file, JSON.stringify({ accessKeyID: 'AKIAWRONGWRONGWRONG', secretAccessKey: secret }));
    process.env.AWS_APPLICATION_CREDENTIALS_JSON = file;
    try {
      const { error, printed } = await usageError(target.url('p'));
      // HeadBucket answers carry no error code, so a refused key is a plain 403.
      expect(error.message).toMatch(/^s3:\/\/backups\/p: open bucket "backups": forbidden \(403\): check/);
      expect(error.message).toContain('AWS_APPLICATION_CREDENTIALS');
      expect(printed).not.toContain(secret);
    } finally {
      process.env.AWS_APPLICATION_CREDENTIALS_JSON = target.credentialsFile;
    }
  });

  it('a credentials file that is not JSON: named, its content not quoted', async () => {
    const secret = `S3CR3T${randomBytes(16).toString('hex')}`;
    const file = join(dir, 'broken-aws.json');
    await writeFile(file, `{"secretAccessKey": "${secret}",`);
    process.env.AWS_APPLICATION_CREDENTIALS_JSON = file;
    try {
      const { error, printed } = await usageError(target.url('p'));
      expect(error.message).toContain(file);
      expect(printed).not.toContain(secret);
    } finally {
      process.env.AWS_APPLICATION_CREDENTIALS_JSON = target.credentialsFile;
    }
  });

  it('missing bucket', async () => {
    const { error } = await usageError(target.url('p').replace('s3://backups/', 's3://no-such-bucket/'));
    expect(error.message).toContain('bucket "no-such-bucket" does not exist: create it, or fix the bucket in --store');
  });

  it('unreachable endpoint', async () => {
    const { error } = await usageError(target.url('p', { endpoint: 'http://127.0.0.1:1' }));
    expect(error.message).toContain('cannot reach http://127.0.0.1:1 (ECONNREFUSED)');
  });

  it('no credentials anywhere', async () => {
    const saved = { ...process.env };
    delete process.env.AWS_APPLICATION_CREDENTIALS_JSON;
    delete process.env.AWS_APPLICATION_CREDENTIALS;
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_PROFILE;
    process.env.AWS_SHARED_CREDENTIALS_FILE = join(dir, 'none');
    process.env.AWS_CONFIG_FILE = join(dir, 'none');
    try {
      const { error } = await usageError(target.url('p'));
      expect(error.message).toContain('no AWS credentials found');
    } finally {
      process.env = saved;
    }
  });
});

describe('Azure Blob', () => {
  let target: AzureTarget;
  beforeAll(async () => {
    target = await startAzureTarget();
  });
  afterAll(async () => {
    await target?.stop();
  });

  it('wrong key: says so, and never prints the key', async () => {
    const key = randomBytes(64).toString('base64');
    await writeFile(join(target.credentialsDir, 'storageKey'), key);
    try {
      const { error, printed } = await usageError(target.url('p'));
      expect(error.message).toMatch(/^azblob:\/\/backups\/p: open container "backups": /);
      expect(error.message).toContain('storageKey');
      expect(printed).not.toContain(key);
    } finally {
      await writeFile(join(target.credentialsDir, 'storageKey'), target.server.accountKey);
    }
  });

  it('missing container', async () => {
    const { error } = await usageError(target.url('p').replace('azblob://backups/', 'azblob://nope/'));
    expect(error.message).toContain('container "nope" does not exist');
  });

  it('unreachable endpoint', async () => {
    const { error } = await usageError(target.url('p', { endpoint: 'http://127.0.0.1:1/devstoreaccount1' }));
    expect(error.message).toContain('cannot reach http://127.0.0.1:1/devstoreaccount1');
  });

  it('no credentials', async () => {
    const saved = process.env.AZURE_APPLICATION_CREDENTIALS;
    delete process.env.AZURE_APPLICATION_CREDENTIALS;
    try {
      const { error } = await usageError(target.url('p'));
      expect(error.message).toContain('no Azure credentials found');
    } finally {
      process.env.AZURE_APPLICATION_CREDENTIALS = saved;
    }
  });
});

describe('GCS', () => {
  let target: GcsTarget;
  beforeAll(async () => {
    target = await startGcsTarget();
  });
  afterAll(async () => {
    await target?.stop();
  });

  it('missing bucket', async () => {
    const { error } = await usageError(target.url('p').replace('gs://backups/', 'gs://nope/'));
    expect(error.message).toContain('bucket "nope" does not exist');
  });

  it('unreachable endpoint', async () => {
    const { error } = await usageError(target.url('p', { endpoint: 'http://127.0.0.1:1' }));
    expect(error.message).toContain('cannot reach http://127.0.0.1:1');
  });

  it('a credentials file that is not a service account: named, its content not quoted', async () => {
    const secret = `-----BEGIN PRIVATE KEY-----${randomBytes(16).toString('hex')}`;
    const file = join(dir, 'sa.json');
    await writeFile(file, `{"private_key": "${secret}"`);
    process.env.GOOGLE_APPLICATION_CREDENTIALS = file;
    try {
      const { error, printed } = await usageError(target.url('p'));
      expect(error.message).toContain(`GOOGLE_APPLICATION_CREDENTIALS=${file} cannot be used`);
      expect(printed).not.toContain(secret);
    } finally {
      delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
    }
  });
});
