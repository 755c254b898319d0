// One etcd version: what a versioned bucket keeps and how it is read back, which does not change with etcd's version.
/**
 * Snapshots hidden or replaced in a versioned S3 bucket (Object Lock keeps the versions): a delete without a version
 * id only adds a delete marker, a PUT over a snapshot only adds a newer version. The restore and verify read through
 * to the newest version that verifies and name what they recovered; a bucket without versions says that nothing can
 * be recovered. Programs as processes, real etcd, the real AWS SDK against the versioned test server
 * (test/servers/s3-versions.ts). The attack drill with the sidecar is attack-drill.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort, type KeyspaceFingerprint, keyspaceFingerprint, LocalStore, openStore } from '@etcd-steward/core';
import {
  buildChainStore,
  type ChainStore,
  fingerprintRestored,
  startCluster,
  type TestCluster,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreArgs } from './restore-program.js';
import { runProgram } from './run-program.js';
import { type S3TestServer, startS3Server, writeS3Credentials } from './servers/s3-server.js';

describe('a versioned S3 store whose snapshots were hidden or replaced', () => {
  let cluster: TestCluster;
  let dir: string;
  let chain: ChainStore;
  let local: LocalStore;
  let server: S3TestServer;
  let attacker: S3Client;
  let env: NodeJS.ProcessEnv;
  let newest: KeyspaceFingerprint;

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'tampered-store-'));
    local = new LocalStore(join(dir, 'store'));
    chain = await buildChainStore(cluster.client(), cluster.endpoints, local, { tempDir: dir, keys: 600 });
    newest = await keyspaceFingerprint(cluster.client(), chain.lastRevision);
    server = await startS3Server({ buckets: ['locked', 'versioned', 'plain'] });
    server.configureBucket('locked', { objectLock: { mode: 'COMPLIANCE', days: 1 } });
    server.configureBucket('versioned', { versioning: 'Enabled' });
    const credentials = join(dir, 'credentials.json');
    await writeS3Credentials(credentials, server);
    env = { AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' };
    // stolen credentials: the same the backups are written with
    attacker = new S3Client({
      endpoint: server.endpoint,
      region: server.region,
      forcePathStyle: true,
      credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    });
  });

  afterAll(async () => {
    attacker?.destroy();
    await server?.stop();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const storeUrl = (bucket: string, prefix: string) =>
    `s3://${bucket}/${prefix}?endpoint=${encodeURIComponent(server.endpoint)}`;

  /** The chain's objects, with their metadata, written to `bucket/prefix` as the programs write them. */
  async function seed(bucket: string, prefix: string): Promise<string> {
    const url = storeUrl(bucket, prefix);
    const saved = { ...process.env };
    Object.assign(process.env, env);
    const store = await openStore(url);
    try {
      for (const object of await local.list('v2/')) {
        const { metadata } = (await local.stat(object.name))!;
        await store.put(object.name, await local.get(object.name), { metadata });
      }
    } finally {
      await store.close?.();
      process.env = saved;
    }
    return url;
  }

  const hide = (bucket: string, prefix: string, name: string) =>
    attacker.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}/${name}` }));
  const overwrite = (bucket: string, prefix: string, name: string, body: Buffer, metadata?: Record<string, string>) =>
    attacker.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/${name}`, Body: body, Metadata: metadata }));
  const sizeOf = async (name: string) => (await local.stat(name))!.size;

  async function restore(url: string, name: string) {
    const peerPort = await freePort();
    const dataDir = join(dir, name);
    const res = await runProgram('etcd-restore', restoreArgs(url, dataDir, peerPort, name), env);
    return { ...res, dataDir, peerPort };
  }

  async function fingerprintOf(r: { dataDir: string; peerPort: number }, token: string) {
    const [fp] = await fingerprintRestored([{ name: 'r0', dataDir: r.dataDir, peerPort: r.peerPort }], {
      initialCluster: `r0=http://127.0.0.1:${r.peerPort}`,
      clusterToken: token,
    });
    return fp;
  }

  const versionOf = (prefix: string, name: string, index: number) =>
    server.versionsOf('locked', `${prefix}/${name}`).filter((v) => !v.deleteMarker)[index].versionId;

  it('restores exactly from the newest full snapshot hidden behind a delete marker, and names it', async () => {
    const url = await seed('locked', 'hidden-full');
    const [, full] = chain.fulls;
    await hide('locked', 'hidden-full', full.name);
    const res = await restore(url, 'hidden-full');
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.snapshot).toBe(full.name);
    expect(result.recovered).toEqual([
      {
        name: full.name,
        versionId: versionOf('hidden-full', full.name, 0),
        why: expect.stringMatching(/delete marker/),
      },
    ]);
    expect(res.stderr).toMatch(/recovered/);
    expect(await fingerprintOf(res, 'hidden-full')).toEqual(newest);
    // the plan says which version it reads, and the summary a person reads names what was recovered
    const plan = await runProgram(
      'etcd-restore',
      ['--store', url, '--data-dir', join(dir, 'hidden-full-plan'), '--dry-run'],
      env,
    );
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(
      new RegExp(`${full.name} \\(version ${versionOf('hidden-full', full.name, 0)}: hidden by a delete marker since `),
    );
    const text = await runProgram(
      'etcd-restore',
      ['--store', url, '--data-dir', join(dir, 'hidden-full-text'), '--name', 'r0', '--initial-cluster-token', 'x'],
      env,
    );
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`RECOVERED ${full.name} from its version ${versionOf('hidden-full', full.name, 0)}`);
    // the listing shows the store as the restore reads it: the hidden snapshot, with its version
    const listed = await runProgram('etcd-snapshot', ['list', '--store', url, '--output', 'json'], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).find((s: { name: string }) => s.name === full.name)).toMatchObject({
      version: { id: versionOf('hidden-full', full.name, 0), why: expect.stringMatching(/delete marker/) },
    });
    const table = await runProgram('etcd-snapshot', ['list', '--store', url], env);
    expect(table.stdout).toContain(`${full.name} (version ${versionOf('hidden-full', full.name, 0)}: hidden by a`);
    // proven against the cluster, through a hidden snapshot: verify's alarm all the same
    const against = cluster.endpoints.join(',');
    const proven = await runProgram(
      'etcd-copy-backups',
      ['verify', '--store', url, '--against', against, '--temp-dir', join(dir, 'proof'), '--output', 'json'],
      env,
    );
    expect(proven.code, proven.stderr).toBe(7);
    expect(JSON.parse(proven.stdout)).toMatchObject({ outcome: 'proven', recovered: [{ name: full.name }] });
  });

  it('reads a full overwritten with garbage of its size and a deleted delta from their locked versions', async () => {
    const prefix = 'overwritten';
    const url = await seed('locked', prefix);
    const [, full] = chain.fulls;
    const delta = chain.deltas[1];
    await overwrite('locked', prefix, full.name, randomBytes(await sizeOf(full.name)));
    await hide('locked', prefix, delta.name);
    const res = await restore(url, prefix);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.snapshot).toBe(full.name);
    expect(result.deltas).toEqual([chain.deltas[1].name, chain.deltas[2].name]);
    expect(result.recovered).toEqual([
      {
        name: full.name,
        versionId: versionOf(prefix, full.name, 1),
        why: expect.stringMatching(/current version does not verify/),
      },
      { name: delta.name, versionId: versionOf(prefix, delta.name, 0), why: expect.stringMatching(/delete marker/) },
    ]);
    expect(await fingerprintOf(res, prefix)).toEqual(newest);

    // the log reads them the same way: every revision of the hidden delta is shown, nothing passed over
    const log = await runProgram('etcd-restore', ['log', '--store', url, '--temp-dir', dir, '--output', 'json'], env);
    expect(log.code, log.stderr).toBe(0);
    const items = log.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(items.filter((i) => i.passedOver || i.missing)).toEqual([]);
    const revisions = new Set(items.map((i) => i.revision));
    for (let r = delta.startRevision; r <= delta.lastRevision; r++)
      expect(revisions.has(r), `revision ${r}`).toBe(true);
    expect(log.stderr).toMatch(/recovered a snapshot hidden or replaced since it was stored[^\n]*Incr-/);

    // verify counts what was hidden or replaced as an alarm of its own
    const verified = await runProgram('etcd-copy-backups', ['verify', '--store', url, '--output', 'json'], env);
    expect(verified.code, verified.stderr).toBe(7);
    const report = JSON.parse(verified.stdout);
    expect(report.restorable.revision).toBe(chain.lastRevision);
    expect(report.recovered.map((r: { name: string }) => r.name)).toEqual([full.name, delta.name]);
    expect(report.protection).toMatchObject({ versioning: 'on', objectLock: { mode: 'COMPLIANCE', days: 1 } });
    const text = await runProgram('etcd-copy-backups', ['verify', '--store', url], env);
    expect(text.code).toBe(7);
    expect(text.stdout).toMatch(/2 snapshot\(s\) hidden or replaced since they were stored/);
    expect(text.stdout).toContain(`RECOVERED ${full.name}`);
    expect(text.stdout).toMatch(/protection: versioning on, Object Lock COMPLIANCE, 1 day\(s\) by default: immutable/);

    // a copy reads its source the same way: the destination gets the stored bytes, and restores on its own
    const destination = `file://${join(dir, 'copied-from-overwritten')}`;
    const copied = await runProgram('etcd-copy-backups', ['--from', url, '--to', destination, '--output', 'json'], env);
    expect(copied.code, copied.stderr).toBe(0);
    expect(JSON.parse(copied.stdout).recovered.map((r: { name: string }) => r.name)).toEqual([full.name, delta.name]);
    const copy = await runProgram('etcd-copy-backups', ['verify', '--store', destination, '--output', 'json']);
    expect(copy.code, copy.stderr).toBe(0);
    expect(JSON.parse(copy.stdout)).toMatchObject({
      damaged: [],
      recovered: [],
      restorable: { revision: chain.lastRevision },
    });

    // and an export: the tar file holds the stored bytes, and what it imports into restores on its own
    const tar = join(dir, 'overwritten.tar');
    const exported = await runProgram(
      'etcd-copy-backups',
      ['export', '--from', url, '--to', tar, '--output', 'json'],
      env,
    );
    expect(exported.code, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout).recovered.map((r: { name: string }) => r.name)).toEqual([full.name, delta.name]);
    expect(exported.stderr).toMatch(/recovered a snapshot hidden or replaced since it was stored/);
    const imported = `file://${join(dir, 'imported-from-overwritten')}`;
    const imports = await runProgram('etcd-copy-backups', ['import', '--from', tar, '--to', imported]);
    expect(imports.code, imports.stderr).toBe(0);
    const importedVerify = await runProgram('etcd-copy-backups', ['verify', '--store', imported, '--output', 'json']);
    expect(importedVerify.code, importedVerify.stderr).toBe(0);
    expect(JSON.parse(importedVerify.stdout)).toMatchObject({
      damaged: [],
      restorable: { revision: chain.lastRevision },
    });
  });

  it('passes over an older version that is damaged too, for the next older one', async () => {
    const prefix = 'damaged-versions';
    const url = await seed('locked', prefix);
    const delta = chain.deltas[2];
    const { metadata } = (await local.stat(delta.name))!;
    const flipped = Buffer.from(await (await local.get(delta.name)).toArray().then((c) => Buffer.concat(c)));
    flipped[Math.floor(flipped.length / 2)] ^= 0x40;
    await overwrite('locked', prefix, delta.name, flipped, metadata);
    await overwrite('locked', prefix, delta.name, randomBytes(await sizeOf(delta.name)));
    const res = await restore(url, prefix);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.recovered).toEqual([
      {
        name: delta.name,
        versionId: versionOf(prefix, delta.name, 2),
        why: expect.stringMatching(/current version does not verify/),
        passedOver: [{ versionId: versionOf(prefix, delta.name, 1), reason: expect.stringMatching(/is damaged/) }],
      },
    ]);
    expect(await fingerprintOf(res, prefix)).toEqual(newest);
  });

  it('restores when every current object is hidden: the restore reads the versions under the markers', async () => {
    const prefix = 'all-hidden';
    const url = await seed('locked', prefix);
    for (const object of await local.list('v2/')) await hide('locked', prefix, object.name);
    const res = await restore(url, prefix);
    expect(res.code, res.stderr).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.recovered.map((r: { name: string }) => r.name)).toEqual([
      chain.fulls[1].name,
      chain.deltas[1].name,
      chain.deltas[2].name,
    ]);
    expect(await fingerprintOf(res, prefix)).toEqual(newest);

    // compaction folds the chain it reads through the versions into a new full snapshot, stored as current
    const compacted = await runProgram('etcd-compact', ['--store', url, '--work-dir', dir, '--output', 'json'], env);
    expect(compacted.code, compacted.stderr).toBe(0);
    const folded = JSON.parse(compacted.stdout);
    expect(folded.recovered.map((r: { name: string }) => r.name)).toEqual(
      result.recovered.map((r: { name: string }) => r.name),
    );
    const again = await restore(url, `${prefix}-compacted`);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ snapshot: folded.name, deltas: [] });
    expect(JSON.parse(again.stdout).recovered).toBeUndefined();
    expect(await fingerprintOf(again, `${prefix}-compacted`)).toEqual(newest);
  });

  it('etcd-restore --fork on a bucket with Object Lock: the abandoned snapshots it cannot delete are left out of every later read', async () => {
    const prefix = 'locked-fork';
    const url = await seed('locked', prefix);
    const [, full] = chain.fulls;
    const forked = await runProgram(
      'etcd-restore',
      [
        ...restoreArgs(url, join(dir, prefix), await freePort(), prefix),
        '--to-revision',
        String(full.revision),
        '--fork',
      ],
      env,
    );
    expect(forked.code, forked.stderr).toBe(0);
    const { setAside } = JSON.parse(forked.stdout);
    expect(setAside.snapshots).toEqual([chain.deltas[2].name, chain.deltas[1].name]);
    expect(forked.stderr).toMatch(/retains a set-aside snapshot in v2/);
    // the locked versions stay in v2/, and the copies in forks/ mark them abandoned: the newest state is the fork's
    const res = await restore(url, `${prefix}-after`);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ snapshot: full.name, revision: full.revision, deltas: [] });
    expect(await fingerprintOf(res, `${prefix}-after`)).toEqual(
      await keyspaceFingerprint(cluster.client(), full.revision),
    );
  });

  it('gc on a versioned bucket without Object Lock deletes the versions of what it deletes, leaving no delete marker', async () => {
    const prefix = 'gc-versions';
    const url = await seed('versioned', prefix);
    const res = await runProgram('etcd-gc', ['--store', url, '--keep-last', '1', '--output', 'json'], env);
    expect(res.code, res.stderr).toBe(0);
    const deleted = JSON.parse(res.stdout).objects.filter((o: { result?: string }) => o.result === 'deleted');
    expect(deleted.map((o: { name: string }) => o.name)).toContain(chain.fulls[0].name);
    for (const { name } of deleted) expect(server.versionsOf('versioned', `${prefix}/${name}`)).toEqual([]);
    const kept = await restore(url, prefix);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout).recovered).toBeUndefined();
  });

  it('without versioning restores as before, and says a damaged snapshot cannot be recovered', async () => {
    const prefix = 'unversioned';
    const url = await seed('plain', prefix);
    const delta = chain.deltas[2];
    await overwrite('plain', prefix, delta.name, randomBytes(await sizeOf(delta.name)));
    const res = await restore(url, prefix);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(delta.name);
    expect(res.stderr).toMatch(/does not decompress/);
    expect(res.stderr).toMatch(/not recoverable: the bucket keeps no versions/);
  });
});
