/** Credentials the way ebr reads them, and rotated Secrets picked up without a restart. */
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RotatingCredentials, readCredentials } from '../../src/store/credential-files.js';
import { AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS } from '../../src/store/s3/config.js';
import { sourceCredentialsEnv } from '../../src/store/source-credentials.js';
import { type S3Target, startS3Target } from './s3-target.js';
import { bodyOf } from './streams.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'creds-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes a file with a modification time in the future, so that a change always shows. */
async function rewrite(file: string, content: string, secondsAhead: number): Promise<void> {
  await writeFile(file, content);
  const when = new Date(Date.now() + secondsAhead * 1000);
  await utimes(file, when, when);
}

describe('ebr credential layouts', () => {
  it('reads a directory of one-value files (a mounted Secret), trimming newlines', async () => {
    const secret = await mkdtemp(join(dir, 'aws-'));
    await writeFile(join(secret, 'accessKeyID'), 'AKID\n');
    await writeFile(join(secret, 'secretAccessKey'), 'SECRET\n');
    await writeFile(join(secret, 'region'), 'eu-central-1');
    await writeFile(join(secret, 'unrelated'), 'x');
    const source = await readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, {
      AWS_APPLICATION_CREDENTIALS: secret,
    });
    expect(source?.values).toEqual({ accessKeyID: 'AKID', secretAccessKey: 'SECRET', region: 'eu-central-1' });
    expect(source?.origin).toBe(`AWS_APPLICATION_CREDENTIALS=${secret}`);
  });

  it('prefers a JSON file in the directory, and the _JSON variable over both', async () => {
    const secret = await mkdtemp(join(dir, 'aws-'));
    await writeFile(join(secret, 'accessKeyID'), 'FROM-FILE');
    await writeFile(
      join(secret, 'secret.json'),
      JSON.stringify({ accessKeyID: 'FROM-DIR-JSON', s3ForcePathStyle: true }),
    );
    const fromDir = await readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, {
      AWS_APPLICATION_CREDENTIALS: secret,
    });
    expect(fromDir?.values).toEqual({ accessKeyID: 'FROM-DIR-JSON', s3ForcePathStyle: 'true' });
    const json = join(dir, 'env.json');
    await writeFile(json, JSON.stringify({ accessKeyID: 'FROM-ENV-JSON' }));
    const fromEnv = await readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, {
      AWS_APPLICATION_CREDENTIALS: secret,
      AWS_APPLICATION_CREDENTIALS_JSON: json,
    });
    expect(fromEnv?.values).toEqual({ accessKeyID: 'FROM-ENV-JSON' });
  });

  it('is undefined when neither variable is set', async () => {
    expect(await readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, {})).toBeUndefined();
  });

  it('re-reads only when a file changes', async () => {
    const file = join(dir, 'rotating.json');
    await rewrite(file, JSON.stringify({ accessKeyID: 'one' }), 1);
    let loads = 0;
    const rotating = new RotatingCredentials(() => {
      loads++;
      return readCredentials(AWS_CREDENTIAL_ENV, AWS_CREDENTIAL_FIELDS, { AWS_APPLICATION_CREDENTIALS_JSON: file });
    });
    expect((await rotating.current())?.values.accessKeyID).toBe('one');
    expect((await rotating.current())?.values.accessKeyID).toBe('one');
    expect(loads).toBe(1);
    await rewrite(file, JSON.stringify({ accessKeyID: 'two' }), 2);
    expect((await rotating.current())?.values.accessKeyID).toBe('two');
    expect(loads).toBe(2);
  });
});

describe("a copy's source credentials (SOURCE_ variables, as ebr reads them)", () => {
  it("SOURCE_<provider>_APPLICATION_CREDENTIALS stands in for the destination's, and SOURCE_OS_* for all of OS_*", () => {
    const env = sourceCredentialsEnv({
      OPENSTACK_APPLICATION_CREDENTIALS_JSON: '/dest/swift.json',
      SOURCE_OPENSTACK_APPLICATION_CREDENTIALS: '/source/swift',
      ALICLOUD_APPLICATION_CREDENTIALS: '/dest/oss',
      OS_AUTH_URL: 'https://dest.example/v3',
      OS_PASSWORD: 'dest',
      SOURCE_OS_AUTH_URL: 'https://source.example/v3',
      SOURCE_OS_USERNAME: 'source-user',
      ECS_ENDPOINT: 'dest.example',
    });
    expect(env.OPENSTACK_APPLICATION_CREDENTIALS).toBe('/source/swift');
    expect(env.OPENSTACK_APPLICATION_CREDENTIALS_JSON).toBeUndefined();
    expect(env.ALICLOUD_APPLICATION_CREDENTIALS).toBe('/dest/oss');
    expect(env.OS_AUTH_URL).toBe('https://source.example/v3');
    expect(env.OS_USERNAME).toBe('source-user');
    expect(env.OS_PASSWORD).toBeUndefined(); // the destination's password is not the source's
    expect(env.ECS_ENDPOINT).toBe('dest.example');
  });
});

describe('rotation on a running S3 store', () => {
  let target: S3Target;
  beforeAll(async () => {
    target = await startS3Target();
  });
  afterAll(async () => {
    await target?.stop();
  });

  it('uses rotated keys from the next request on, with no restart', async () => {
    const secret = await mkdtemp(join(dir, 'aws-rotating-'));
    const write = (accessKey: string, ahead: number) =>
      Promise.all([
        rewrite(join(secret, 'accessKeyID'), accessKey, ahead),
        rewrite(join(secret, 'secretAccessKey'), target.server.secretAccessKey, ahead),
      ]);
    await write(target.server.accessKeyId, 1);
    delete process.env.AWS_APPLICATION_CREDENTIALS_JSON;
    process.env.AWS_APPLICATION_CREDENTIALS = secret;
    const store = await target.open('rotation', { retries: '0' });
    await store.put('v2/a', bodyOf(Buffer.from('a')));

    await write('AKIAREVOKED', 2); // the Secret now holds a key the server does not know
    await expect(store.put('v2/b', bodyOf(Buffer.from('b')))).rejects.toThrow(/forbidden|access key/);

    await write(target.server.accessKeyId, 3); // rotated back to a good key
    await store.put('v2/c', bodyOf(Buffer.from('c')));
    expect((await store.list()).map((o) => o.name)).toEqual(['v2/a', 'v2/c']);
    await store.close?.();
  });
});
