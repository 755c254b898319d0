/**
 * ECS and OCS, ebr's names for S3-compatible stores, through the S3 test server with the credentials laid out as
 * ebr reads them: ECS_* variables, and OPENSHIFT_APPLICATION_CREDENTIALS files.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, UsageError } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type S3TestServer, startS3Server } from '../../../../test/servers/s3-server.js';
import { describeConformance } from './conformance.js';
import { FAST_RETRIES, S3_PART_SIZE } from './s3-target.js';
import { bodyOf, readAll } from './streams.js';

const PART = `partSize=${S3_PART_SIZE}`;

/** ebr's ECS variables for the server; its endpoint without the scheme, as ECS_DISABLE_SSL then says http. */
function ecsEnv(server: S3TestServer, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ECS_ENDPOINT: server.endpoint.replace(/^http:\/\//, ''),
    ECS_DISABLE_SSL: 'true',
    ECS_ACCESS_KEY_ID: server.accessKeyId,
    ECS_SECRET_ACCESS_KEY: server.secretAccessKey,
    ...extra,
  };
}

/** ebr's OCS credentials as a directory of one-value files. */
async function ocsDir(server: S3TestServer, dir: string, values: Record<string, string> = {}): Promise<string> {
  const secret = await mkdtemp(join(dir, 'ocs-'));
  const all = {
    endpoint: server.endpoint,
    region: server.region,
    accessKeyID: server.accessKeyId,
    secretAccessKey: server.secretAccessKey,
    disableSSL: 'false',
    insecureSkipVerify: 'false',
    ...values,
  };
  for (const [name, value] of Object.entries(all)) await writeFile(join(secret, name), `${value}\n`);
  return secret;
}

const started: { server?: S3TestServer; dir?: string } = {};
async function shared(): Promise<{ server: S3TestServer; dir: string }> {
  started.server ??= await startS3Server({ buckets: ['backups'] });
  started.dir ??= await mkdtemp(join(tmpdir(), 's3-compatible-'));
  return { server: started.server, dir: started.dir };
}
afterAll(async () => {
  await started.server?.stop();
  if (started.dir) await rm(started.dir, { recursive: true, force: true });
});

// ECS and OCS are both the S3 provider with ebr's credential sources: the conformance suite runs once for the two
// (OCS, below, through its credential folder); ECS's variables are checked below, and end to end in
// test/sidecar-stores.test.ts.
describeConformance('OCS', async () => {
  const { server, dir } = await shared();
  const secret = await ocsDir(server, dir);
  return {
    open: (prefix) =>
      openStore(`ocs://backups/${prefix}?${PART}`, {
        retry: FAST_RETRIES,
        env: { OPENSHIFT_APPLICATION_CREDENTIALS: secret },
      }),
    partSize: S3_PART_SIZE,
    pendingUploads: async () => server.pendingUploads('backups').length,
    stop: async () => {},
  };
});

describe('ECS and OCS credentials as ebr reads them', () => {
  let server: S3TestServer;
  let dir: string;
  beforeAll(async () => {
    ({ server, dir } = await shared());
  });

  const refused = async (url: string, env: NodeJS.ProcessEnv) => {
    const err = await openStore(url, { retry: { attempts: 1 }, env }).then(
      () => new Error('opened'),
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(UsageError);
    return err.message;
  };

  it('ECS: each missing variable is named; a wrong secret is refused at open, and never printed', async () => {
    expect(await refused('ecs://backups/x', { ECS_ENDPOINT: 'ecs.example:9021' })).toMatch(
      /ecs:\/\/backups\/x: ECS_ACCESS_KEY_ID, ECS_SECRET_ACCESS_KEY are not set/,
    );
    const wrongKey = await refused('ecs://backups/x', ecsEnv(server, { ECS_ACCESS_KEY_ID: 'AKIAWRONG' }));
    expect(wrongKey).toMatch(/ECS_ACCESS_KEY_ID and ECS_SECRET_ACCESS_KEY/);
    expect(wrongKey).not.toContain(server.secretAccessKey);
  });

  it('OCS: a JSON file in the directory wins, as in ebr; what is missing is named', async () => {
    const secret = await ocsDir(server, dir, { accessKeyID: 'AKIAWRONG' });
    await writeFile(
      join(secret, 'credentials.json'),
      JSON.stringify({
        endpoint: server.endpoint,
        region: server.region,
        accessKeyID: server.accessKeyId,
        secretAccessKey: server.secretAccessKey,
        disableSSL: false,
      }),
    );
    const store = await openStore('ocs://backups/json', { env: { OPENSHIFT_APPLICATION_CREDENTIALS: secret } });
    await store.put('v2/x', bodyOf(Buffer.from('from json')));
    expect((await readAll(await store.get('v2/x'))).toString()).toBe('from json');
    await store.close?.();

    const partial = await mkdtemp(join(dir, 'ocs-partial-'));
    await writeFile(join(partial, 'endpoint'), server.endpoint);
    await writeFile(join(partial, 'accessKeyID'), server.accessKeyId);
    expect(await refused('ocs://backups/x', { OPENSHIFT_APPLICATION_CREDENTIALS: partial })).toMatch(
      /lacks region, secretAccessKey/,
    );
    expect(await refused('ocs://backups/x', {})).toMatch(/no OCS credentials: set OPENSHIFT_APPLICATION_CREDENTIALS/);
  });

  it('OCS: disableSSL turns the endpoint into http, insecureSkipVerify is read as a yes/no', async () => {
    const https = await ocsDir(server, dir, {
      endpoint: server.endpoint.replace(/^http:/, 'https:'),
      disableSSL: 'true',
    });
    const store = await openStore('ocs://backups/ssl', { env: { OPENSHIFT_APPLICATION_CREDENTIALS: https } });
    await store.put('v2/y', bodyOf(Buffer.from('over http')));
    await store.close?.();
    const bad = await ocsDir(server, dir, { insecureSkipVerify: 'maybe' });
    expect(await refused('ocs://backups/x', { OPENSHIFT_APPLICATION_CREDENTIALS: bad })).toMatch(/insecureSkipVerify/);
  });
});
