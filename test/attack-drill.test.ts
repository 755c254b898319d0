// One etcd version: the store's versions and locks under an attacker, which do not change with etcd's version.
/**
 * The attack drill (docs/operator.md, "The backups were tampered with"): the real sidecar backs etcd up into an S3
 * bucket under Object Lock, then credentials as the sidecar's delete and overwrite every current object of the
 * store. The locked versions stay; `etcd-restore` brings the newest state back exactly, naming what it read from
 * which version; `etcd-copy-backups verify` raises its own alarm; `etcd-gc` hides nothing. A sidecar that requires
 * an immutable store refuses one without Object Lock. Programs as processes, real etcd, the real AWS SDK against the
 * versioned test server (test/servers/s3-versions.ts).
 */
import { randomBytes } from 'node:crypto';
import {
  DeleteObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { freePort, keyspaceFingerprint } from '@etcd-steward/core';
import { fingerprintRestored, startCluster, writeWorkload } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { restoreArgs } from './restore-program.js';
import { runProgram } from './run-program.js';
import { startS3Server, writeS3Credentials } from './servers/s3-server.js';
import { metric, snapshotsReach, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('attack-drill-');

it('restores the newest state exactly after stolen credentials deleted and overwrote every object of a locked store', async () => {
  const server = await startS3Server({ buckets: ['locked', 'open'] });
  onTestFinished(() => server.stop());
  server.configureBucket('locked', { objectLock: { mode: 'COMPLIANCE', days: 1 } });
  const credentials = at('credentials.json');
  await writeS3Credentials(credentials, server);
  const env = { ...process.env, AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' };
  const storeOf = (bucket: string) => `s3://${bucket}/etcd?endpoint=${encodeURIComponent(server.endpoint)}`;
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const client = cluster.client();

  // Asked to require an immutable store, the sidecar refuses a bucket without Object Lock before it starts.
  const refused = await runProgram(
    'etcd-snapshot',
    [
      'run',
      '--endpoints',
      cluster.endpoints[0],
      '--store',
      storeOf('open'),
      '--spool-dir',
      at('refused'),
      '--require-immutable-store',
    ],
    env,
  );
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(
    /--require-immutable-store: s3:\/\/open\/etcd is not immutable: versioning off, no Object Lock/,
  );
  expect(refused.stderr).not.toContain(server.secretAccessKey);

  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: storeOf('locked'),
    dir: at('sidecar'),
    args: ['--require-immutable-store'],
    env,
  });
  onTestFinished(() => sidecar.kill());
  await waitFor(
    'the store protection to be read',
    async () => (await metric(sidecar.url, 'etcd_snapshot_store_immutable')) === 1,
  );
  expect(await metric(sidecar.url, 'etcd_snapshot_store_immutable_required')).toBe(1);
  expect(await metric(sidecar.url, 'etcd_snapshot_store_versioning')).toBe(1);
  expect(await sidecar.log()).toMatch(
    /store protection: versioning on, Object Lock COMPLIANCE, 1 day\(s\) by default: immutable/,
  );
  await waitFor('leadership', async () => (await metric(sidecar.url, 'etcd_snapshot_leader')) === 1);

  // fulls and deltas: writes, a full snapshot, more writes, another, more writes, all stored
  for (const [seed, prefix] of [
    [1, '/a/'],
    [2, '/b/'],
    [3, '/c/'],
  ] as const) {
    await writeWorkload(client, { keys: 200, seed, prefix });
    // each stage's writes in a delta of their own before the next full snapshot
    const written = (await keyspaceFingerprint(client)).revision;
    await waitFor('a delta of these writes', () => snapshotsReach(sidecar.url, written));
    // (503 while the sidecar takes its first full snapshot)
    if (seed < 3) {
      await waitFor(
        'a full snapshot',
        async () => (await fetch(`${sidecar.url}/snapshot/full`, { method: 'POST' })).ok,
      );
    }
  }
  const source = await keyspaceFingerprint(client);
  await waitFor('the snapshots to reach the last revision', () => snapshotsReach(sidecar.url, source.revision));
  expect(await sidecar.stop()).toBe(0);

  // The attack, with the sidecar's own credentials: every current object deleted or overwritten with garbage.
  const attacker = new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
  onTestFinished(() => attacker.destroy());
  const Bucket = 'locked';
  const current = ((await attacker.send(new ListObjectsV2Command({ Bucket, Prefix: 'etcd/v2/' }))).Contents ?? []).map(
    (o) => o.Key!,
  );
  const fulls = current.filter((k) => k.includes('/Full-'));
  expect(fulls.length).toBeGreaterThanOrEqual(2);
  expect(current.length - fulls.length).toBeGreaterThanOrEqual(2);
  const versionsBefore = await attacker.send(new ListObjectVersionsCommand({ Bucket, Prefix: 'etcd/' }));
  // the lock holds: a version cannot be deleted
  const locked = await attacker
    .send(
      new DeleteObjectCommand({
        Bucket,
        Key: current[0],
        VersionId: versionsBefore.Versions!.find((v) => v.Key === current[0])!.VersionId,
      }),
    )
    .catch((err: Error) => err);
  expect((locked as Error).name).toBe('AccessDenied');
  for (const [i, Key] of current.entries()) {
    if (i % 2 === 0) await attacker.send(new DeleteObjectCommand({ Bucket, Key }));
    else await attacker.send(new PutObjectCommand({ Bucket, Key, Body: randomBytes(1024) }));
  }
  // what was deleted is gone from the listing; what was overwritten reads as garbage
  expect(((await attacker.send(new ListObjectsV2Command({ Bucket, Prefix: 'etcd/v2/' }))).Contents ?? []).length).toBe(
    Math.floor(current.length / 2),
  );

  const peerPort = await freePort();
  const dataDir = at('restored');
  const restored = await runProgram('etcd-restore', restoreArgs(storeOf('locked'), dataDir, peerPort, 'drill'), env);
  expect(restored.code, restored.stderr).toBe(0);
  const result = JSON.parse(restored.stdout);
  const used = [result.snapshot, ...result.deltas];
  expect(result.recovered.map((r: { name: string }) => r.name)).toEqual(used);
  for (const r of result.recovered) {
    expect(r).toMatchObject({
      versionId: expect.any(String),
      why: expect.stringMatching(/hidden by a delete marker|current version does not verify/),
    });
  }
  expect(restored.stderr).toMatch(/recovered a snapshot hidden or replaced since it was stored/);
  const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort }], {
    initialCluster: `r0=http://127.0.0.1:${peerPort}`,
    clusterToken: 'drill',
  });
  expect(fingerprint).toEqual(source);

  // verify's own alarm: every snapshot of the store was hidden or replaced
  const verified = await runProgram(
    'etcd-copy-backups',
    ['verify', '--store', storeOf('locked'), '--output', 'json'],
    env,
  );
  expect(verified.code, verified.stderr).toBe(7);
  const report = JSON.parse(verified.stdout);
  expect(report.recovered).toHaveLength(current.length);
  expect(report.damaged).toEqual([]);
  expect(report.restorable.revision).toBe(source.revision);

  // gc deletes what its policy says where Object Lock lets it, and never hides a locked version behind a marker
  const versionsOf = async () =>
    JSON.stringify(
      await attacker
        .send(new ListObjectVersionsCommand({ Bucket, Prefix: 'etcd/v2/' }))
        .then((r) => [r.Versions, r.DeleteMarkers]),
    );
  const before = await versionsOf();
  const gc = await runProgram(
    'etcd-gc',
    [
      '--store',
      storeOf('locked'),
      '--garbage-collection-policy',
      'LimitBased',
      '--max-backups',
      '1',
      '--output',
      'json',
    ],
    env,
  );
  expect(gc.code, gc.stderr).toBe(0);
  const summary = JSON.parse(gc.stdout).summary;
  expect(summary.immutable.objects).toBeGreaterThan(0);
  expect(summary.deleted.objects).toBe(0);
  expect(await versionsOf()).toBe(before);
});
