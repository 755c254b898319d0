import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
import { metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-s3-');

it('on becoming leader the sidecar aborts the multipart uploads a killed writer left in its S3 store', async () => {
  const server = await startS3Server({ buckets: ['backups'] });
  onTestFinished(() => server.stop());
  // What a writer killed mid-upload leaves: an upload begun, a part sent, never completed. (The test server
  // checks the access key, not the signature.)
  const authorization = `AWS4-HMAC-SHA256 Credential=${server.accessKeyId}/20260101/${server.region}/s3/aws4_request`;
  const key = 'etcd/v2/Full-00000000-00000009-1700000000.zst';
  const created = await fetch(`${server.endpoint}/backups/${key}?uploads`, {
    method: 'POST',
    headers: { authorization },
  });
  const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1];
  expect(uploadId).toBeDefined();
  await fetch(`${server.endpoint}/backups/${key}?partNumber=1&uploadId=${uploadId}`, {
    method: 'PUT',
    headers: { authorization },
    body: 'part of a snapshot',
  });
  // Another prefix's uploads are not the sidecar's business.
  await fetch(`${server.endpoint}/backups/elsewhere/object?uploads`, { method: 'POST', headers: { authorization } });
  expect(server.pendingUploads('backups').map((u) => u.key)).toEqual([key, 'elsewhere/object']);

  const credentials = at('credentials.json');
  await writeS3Credentials(credentials, server);
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `s3://backups/etcd?endpoint=${encodeURIComponent(server.endpoint)}`,
    dir: at('sidecar'),
    args: ['--incomplete-upload-max-age', '0s'],
    env: { ...process.env, AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
  });
  onTestFinished(() => sidecar.kill());
  await waitFor('leadership', async () => (await metric(sidecar.url, 'etcd_snapshot_leader')) === 1);
  await waitFor(
    'the incomplete upload to be aborted',
    async () => !server.pendingUploads('backups').some((u) => u.key === key),
  );
  expect(server.pendingUploads('backups').map((u) => u.key)).toEqual(['elsewhere/object']);
  expect(await sidecar.stop()).toBe(0);
  expect(await sidecar.log()).toMatch(/aborted incomplete uploads/);
});
