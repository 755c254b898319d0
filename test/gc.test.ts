import { existsSync } from 'node:fs';
import { cp, mkdir, open, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  type SnapStore,
} from '@etcd-steward/core';
import {
  buildChainStore,
  type ChainStore,
  fingerprintRestored,
  startCluster,
  type TestCluster,
} from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type S3Target, startS3Target } from '../packages/core/test/store/s3-target.js';
import { ebrLocalListing } from './ebr-local-listing.js';
import { ebrStoreDir } from './fixtures.js';
import { runProgram, startProgram } from './run-program.js';
import { waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/**
 * etcd-gc as a process on stores a real etcd filled (two fulls and their deltas), with ebr's objects mixed in:
 * a store it wrote (its fixture), a legacy v1 full, chunk objects (beside their snapshot on S3 only: a file
 * system cannot hold both), files that are not snapshots.
 */
describe('etcd-gc (programs as processes, real etcd, file:// and S3 stores)', () => {
  const path = tempDir('gc-');
  let cluster: TestCluster;
  let chain: ChainStore;
  let source: KeyspaceFingerprint;
  let s3: S3Target;
  const fast = ['--lock-settle', '1s'];

  /** Every file of a local store folder but the store's own metadata, as paths. */
  const files = async (root: string) =>
    (await readdir(root, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile() && !e.parentPath.startsWith(join(root, '.metadata')))
      .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
      .sort();

  beforeAll(async () => {
    cluster = await startCluster();
    const client = cluster.client();
    const store = new LocalStore(path('origin'));
    chain = await buildChainStore(client, cluster.endpoints, store, { tempDir: path(), keys: 600 });
    source = await keyspaceFingerprint(client, chain.lastRevision);
    // what ebr leaves besides snapshots: its own store's objects, a legacy full, chunks, and files of others
    await cp(join(ebrStoreDir, 'v2'), path('origin', 'v2'), { recursive: true });
    await mkdir(path('origin', 'v1', 'Backup-1767225600'), { recursive: true });
    await cp(
      join(ebrStoreDir, 'v2', 'Full-00000000-00000003-1795299353.gz'),
      path('origin', 'v1', 'Backup-1767225600', 'Full-00000000-00000002-1767225600.gz'),
    );
    await mkdir(path('origin', 'v2', 'Full-00000000-09999999-1767225600.gz'), { recursive: true });
    await writeFile(
      path('origin', 'v2', 'Full-00000000-09999999-1767225600.gz', '0000000002'),
      'a chunk of an upload that died',
    );
    await writeFile(path('origin', 'v2', 'README.txt'), 'not a snapshot');
    await writeFile(path('origin', 'v2', 'Full-not-a-snapshot'), 'not a snapshot either');
    for (const copy of ['file', 'damaged', 'locked']) await cp(path('origin'), path(copy), { recursive: true });
  });

  afterAll(async () => {
    await cluster?.stop();
    await s3?.stop();
  });

  const gc = (store: string, ...args: string[]) => runProgram('etcd-gc', ['--store', store, ...fast, ...args]);

  async function restoredFingerprint(storeUrl: string, name: string) {
    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = path(`restored-${name}`);
    const res = await runProgram('etcd-restore', [
      ...['--store', storeUrl, '--data-dir', dataDir, '--name', 'r0', '--initial-advertise-peer-urls', peer],
      ...['--initial-cluster-token', name, '--output', 'json'],
    ]);
    expect(res.code, res.stderr).toBe(0);
    const [fingerprint] = await fingerprintRestored([{ name: 'r0', dataDir, peerPort }], {
      initialCluster: `r0=${peer}`,
      clusterToken: name,
    });
    return { fingerprint, revision: JSON.parse(res.stdout).revision as number };
  }

  /** The decisions --keep-last 1 makes of the mixed store, by object name. */
  const keepLastOne = () => ({
    'v1/Backup-1767225600/Full-00000000-00000002-1767225600.gz': 'delete no rule keeps it',
    'v2/Full-00000000-00000003-1795299353.gz': 'delete no rule keeps it',
    'v2/Incr-00000004-00000007-1795299359.gz': 'delete older than the delta retention period',
    'v2/Full-00000000-00000007-1795299379': 'delete no rule keeps it',
    'v2/Incr-00000008-00000008-1795299383': 'delete older than the delta retention period',
    'v2/Incr-00000009-00000009-1795299385': 'delete older than the delta retention period',
    [chain.fulls[0].name]: 'delete no rule keeps it',
    [chain.deltas[0].name]: 'delete older than the delta retention period',
    [chain.fulls[1].name]: 'keep newest restorable chain',
    [chain.deltas[1].name]: 'keep newest restorable chain',
    [chain.deltas[2].name]: 'keep newest restorable chain',
    'v2/Full-00000000-09999999-1767225600.gz/0000000002': 'delete ebr chunk of an abandoned upload',
  });

  it('--dry-run prints every snapshot with keep or delete and the rule (JSON), and changes nothing', async () => {
    const before = await files(path('file'));
    const res = await gc(`file://${path('file')}`, '--keep-last', '1', '--dry-run', '--output', 'json');
    expect(res.code, res.stderr).toBe(0);
    const report = JSON.parse(res.stdout);
    expect(
      Object.fromEntries(
        report.objects.map((o: { name: string; action: string; rule: string }) => [o.name, `${o.action} ${o.rule}`]),
      ),
    ).toEqual(keepLastOne());
    expect(report).toMatchObject({
      dryRun: true,
      restorableFull: chain.fulls[1].name,
      summary: { deleted: { objects: 9 }, kept: { objects: 3 }, untouched: 2 },
    });
    expect(await files(path('file'))).toEqual(before);
  });

  it('deletes what no rule keeps, never what is not a snapshot, and a restore after it gives the same revision and keyspace', async () => {
    const res = await gc(`file://${path('file')}`, '--keep-last', '1');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^ACTION +KIND +CREATED \(UTC\) +SIZE +OBJECT +RULE$/m);
    expect(res.stderr).toContain('"level":"progress","msg":"delete","objects":9,"of":9');
    expect(res.stdout).toMatch(new RegExp(`^deleted +Full .+ ${chain.fulls[0].name} +no rule keeps it$`, 'm'));
    expect(res.stdout).toMatch(
      /^deleted 9 \(.+\); kept 3 \(.+\); failed 0 \(0 B\); immutable, skipped 0 \(0 B\); not snapshots, untouched 2$/m,
    );
    expect(await files(path('file'))).toEqual(
      [
        chain.fulls[1].name,
        chain.deltas[1].name,
        chain.deltas[2].name,
        'v2/Full-not-a-snapshot',
        'v2/README.txt',
      ].sort(),
    );
    // ebr reads the store as before: the lock is gone, only snapshots parse
    expect(await ebrLocalListing(path('file'))).toEqual(
      [chain.fulls[1].name, chain.deltas[1].name, chain.deltas[2].name].sort(),
    );
    expect(await restoredFingerprint(`file://${path('file')}`, 'after-gc')).toEqual({
      fingerprint: source,
      revision: chain.lastRevision,
    });
  });

  it('keeps the chain of the newest full that verifies when the newest one is damaged', async () => {
    const damaged = path('damaged', ...chain.fulls[1].name.split('/'));
    const handle = await open(damaged, 'r+');
    await handle.write(Buffer.alloc(64, 0xff), 0, 64, 100);
    await handle.close();
    const res = await gc(`file://${path('damaged')}`, '--keep-last', '1', '--output', 'json');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain(`${chain.fulls[1].name} does not verify`);
    const report = JSON.parse(res.stdout);
    expect(report.restorableFull).toBe(chain.fulls[0].name);
    const kept = report.objects
      .filter((o: { action: string }) => o.action === 'keep')
      .map((o: { name: string; rule: string }) => `${o.name} ${o.rule}`);
    expect(kept).toEqual([
      `${chain.fulls[0].name} newest restorable chain`,
      `${chain.fulls[1].name} keep-last`,
      `${chain.deltas[0].name} newest restorable chain`,
      `${chain.deltas[1].name} newest restorable chain`,
      `${chain.deltas[2].name} newest restorable chain`,
    ]);
    expect(await restoredFingerprint(`file://${path('damaged')}`, 'damaged')).toEqual({
      fingerprint: source,
      revision: chain.lastRevision,
    });
  });

  it('prints the whole report of a store of thousands of objects through a pipe', async () => {
    await cp(path('origin'), path('large'), { recursive: true });
    const old = Array.from({ length: 4000 }, (_, i) => `Incr-00000001-00000001-${1_700_000_000 + i}.gz`);
    await Promise.all(old.map((name) => writeFile(path('large', 'v2', name), '')));
    const res = await gc(`file://${path('large')}`, '--keep-last', '1', '--dry-run', '--output', 'json');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout.length).toBeGreaterThan(1 << 19);
    expect(JSON.parse(res.stdout).objects).toHaveLength(4012);
  });

  it('refuses bad usage with exit code 2 before touching anything', async () => {
    const before = await files(path('locked'));
    const store = `file://${path('locked')}`;
    const cases: [string[], RegExp][] = [
      [[], /no retention policy: give --garbage-collection-policy Exponential\|LimitBased, or keep rules/],
      [['--keep-daily', '-1'], /--keep-daily "-1" must be a whole number, 0 or more/],
      [['--garbage-collection-policy', 'LimitBased', '--max-backups', '0'], /--max-backups must be 1 or more/],
      [['--keep-last', '1', '--time-zone', 'Mars/Olympus'], /--time-zone "Mars\/Olympus" is not a time zone/],
      [['--keep-last', '1', '--keep-within', '3 days'], /--keep-within "3 days" is not a duration/],
      [['--keep-last', '1', '--max-total-size', 'lots'], /--max-total-size "lots" is not a size in bytes/],
    ];
    for (const [args, message] of cases) {
      const res = await gc(store, ...args);
      expect(res.code, res.stderr).toBe(2);
      expect(JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg).toMatch(message);
    }
    expect(await files(path('locked'))).toEqual(before);
  });

  it('refuses a keep rule of 0, which keeps nothing: exit 2, the flag and the fix named, nothing deleted', async () => {
    await cp(path('origin'), path('keeps-nothing'), { recursive: true }); // a run that is not refused deletes
    const before = await files(path('keeps-nothing'));
    const store = `file://${path('keeps-nothing')}`;
    for (const args of [
      ['--keep-last', '0'],
      ['--keep-daily', '7', '--keep-hourly', '0'],
      ['--keep-within', '0'],
    ]) {
      const res = await gc(store, ...args);
      expect(res.code, res.stderr).toBe(2);
      const flag = args.at(-2)!;
      expect(JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg).toMatch(
        new RegExp(`^${flag} "0" keeps nothing: give (1 or more|a time above zero).*, or leave the flag out$`),
      );
    }
    expect(await files(path('keeps-nothing'))).toEqual(before);
  });

  it('names --max-total-size when it is given without a policy (exit 2)', async () => {
    const res = await gc(`file://${path('locked')}`, '--max-total-size', '50Gi');
    expect(res.code, res.stderr).toBe(2);
    expect(JSON.parse(res.stderr.trim().split('\n').at(-1)!).msg).toMatch(
      /^--max-total-size "50Gi" alone is no retention policy: .* e\.g\. --keep-daily 30 --max-total-size 50Gi$/,
    );
  });

  it('one at a time: a live lock stops a run; of two runs at once one works and the other says the store is locked', async () => {
    const store = `file://${path('locked')}`;
    const before = await files(path('locked'));
    const live = {
      token: 'f'.repeat(32),
      holder: 'compactor:7',
      purpose: 'compaction',
      expiresAt: new Date(Date.now() + 600_000).toISOString(),
    };
    await mkdir(path('locked', 'locks'), { recursive: true });
    await writeFile(path('locked', 'locks', 'maintenance.json'), JSON.stringify(live));
    const refused = await gc(store, '--keep-last', '1');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /is locked by compactor:7 \(compaction\) until .+: another gc or compaction runs; try again later/,
    );
    expect(await files(path('locked'))).toEqual([...before, 'locks/maintenance.json'].sort());

    await writeFile(
      path('locked', 'locks', 'maintenance.json'),
      JSON.stringify({ ...live, expiresAt: new Date(Date.now() - 1000).toISOString() }),
    );
    const both = await Promise.all(
      [1, 2].map(() => runProgram('etcd-gc', ['--store', store, '--lock-settle', '2s', '--keep-last', '1'])),
    );
    expect(both.map((r) => r.code).sort()).toEqual([0, 1]);
    expect(both.find((r) => r.code === 1)?.stderr).toMatch(/is locked by .+ \(etcd-gc\)/);
    expect(await ebrLocalListing(path('locked'))).toHaveLength(3);
  });

  it('takes over at once the lock of a gc on this host that was killed, saying so, instead of waiting for it to expire', async () => {
    await cp(path('origin'), path('dead-holder'), { recursive: true });
    const store = `file://${path('dead-holder')}`;
    const killed = startProgram('etcd-gc', ['--store', store, '--lock-settle', '30s', '--keep-last', '1']);
    const exited = new Promise((resolve) => killed.once('exit', resolve));
    await waitFor(
      'the first gc to write its lock',
      async () => existsSync(path('dead-holder', 'locks', 'maintenance.json')),
      30_000,
    );
    killed.kill('SIGKILL');
    await exited;
    const lock = JSON.parse(await readFile(path('dead-holder', 'locks', 'maintenance.json'), 'utf8'));
    expect(Date.parse(lock.expiresAt)).toBeGreaterThan(Date.now() + 60_000); // the default --lock-ttl, 2m, is far off

    const res = await gc(store, '--keep-last', '1');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(
      /"level":"warn","msg":"taking over the store lock: its holder, a process on this host, has ended".*"purpose":"etcd-gc"/,
    );
    expect(existsSync(path('dead-holder', 'locks', 'maintenance.json'))).toBe(false);
  });

  describe('on the S3 test server', () => {
    let store: SnapStore;

    beforeAll(async () => {
      s3 = await startS3Target();
      store = await s3.open('gc');
      const origin = new LocalStore(path('origin'));
      for (const object of [...(await origin.list('v1/')), ...(await origin.list('v2/'))]) {
        await store.put(object.name, await origin.get(object.name), { metadata: object.metadata });
      }
      // on an object store, unlike a file system, a chunk can sit beside its composed snapshot
      await store.put(
        `${chain.fulls[0].name}/0000000001`,
        Readable.from([Buffer.from('a chunk of a complete snapshot')]),
      );
    });
    afterAll(async () => {
      await store?.close?.();
    });

    it('retries a failed delete, reports one that keeps failing, goes on with the rest, and exits 1', async () => {
      const prefix = 'refusing';
      const refusing = await s3.open(prefix);
      const origin = new LocalStore(path('origin'));
      for (const object of await origin.list('v2/')) {
        await refusing.put(object.name, await origin.get(object.name), { metadata: object.metadata });
      }
      await refusing.close?.();
      s3.server.refuseDeletes(s3.bucket, `${prefix}/${chain.fulls[0].name}`, 1); // then it goes through
      s3.server.refuseDeletes(s3.bucket, `${prefix}/${chain.deltas[0].name}`, 100);
      const res = await gc(s3.url(prefix), '--keep-last', '1', '--output', 'json');
      expect(res.code, res.stderr).toBe(1);
      const report = JSON.parse(res.stdout);
      const byName = new Map(report.objects.map((o: { name: string }) => [o.name, o]));
      expect(byName.get(chain.fulls[0].name)).toMatchObject({ action: 'delete', result: 'deleted' });
      expect(byName.get(chain.deltas[0].name)).toMatchObject({
        action: 'delete',
        result: 'failed',
        reason: expect.stringMatching(/access denied/i),
      });
      expect(report.summary).toMatchObject({ deleted: { objects: 7 }, failed: { objects: 1 }, kept: { objects: 4 } });
      expect(res.stderr).toContain(`${chain.deltas[0].name}: not deleted`);
    });

    it('skips and reports objects under object lock, deletes the rest, aborts incomplete uploads', async () => {
      s3.server.lockObject(s3.bucket, `gc/${chain.fulls[0].name}`, new Date(Date.now() + 86_400_000));
      s3.server.lockObject(s3.bucket, `gc/${chain.deltas[0].name}`, 'legal-hold');
      // an upload a killed writer left: begun, never completed
      const started = await fetch(
        `${s3.server.endpoint}/${s3.bucket}/gc/v2/Full-00000000-00000100-1767225600.gz?uploads`,
        {
          method: 'POST',
          headers: {
            authorization: `AWS4-HMAC-SHA256 Credential=${s3.server.accessKeyId}/20260101/us-east-1/s3/aws4_request`,
          },
        },
      );
      expect(started.status).toBe(200);
      expect(s3.server.pendingUploads(s3.bucket)).toHaveLength(1);

      const res = await gc(s3.url('gc'), '--keep-last', '1', '--incomplete-upload-max-age', '0');
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(
        new RegExp(
          `^immutable, skipped +Full .+ ${chain.fulls[0].name} +no rule keeps it \\(.+S3 object lock: retained until .+\\)$`,
          'm',
        ),
      );
      expect(res.stdout).toMatch(
        new RegExp(`^immutable, skipped +Incr .+ ${chain.deltas[0].name} .+S3 object lock: legal hold\\)$`, 'm'),
      );
      expect(res.stdout).toMatch(
        /^deleted 8 .+; failed 0 \(0 B\); immutable, skipped 2 .+; incomplete uploads aborted 1$/m,
      );
      expect(s3.server.pendingUploads(s3.bucket)).toEqual([]);
      expect((await store.list('v2/')).map((o) => o.name).sort()).toEqual(
        [
          chain.fulls[0].name,
          chain.deltas[0].name,
          chain.fulls[1].name,
          chain.deltas[1].name,
          chain.deltas[2].name,
          'v2/Full-not-a-snapshot',
          'v2/README.txt',
        ].sort(),
      );
    });
  });
});
