import { createHash } from 'node:crypto';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Etcd3, freePort } from '@etcd-steward/core';
import { readRestored, startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreDir as ebrFixture } from './fixtures.js';
import { errorMessages as errors, runProgram } from './run-program.js';
import {
  etcdRevision,
  firstDelta,
  keyspaceOnceStored,
  metric,
  type SidecarProcess,
  startSidecar,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/** A key as etcd serves it, with the lease's digits as etcd sent them (an int64: past 2^53). */
interface Kv {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease: string;
}

/** The byte after a prefix's last, as etcdctl computes a prefix's range end. */
const rangeEnd = (prefix: string) => {
  const end = Buffer.from(prefix);
  end[end.length - 1]++;
  return end;
};

/** etcd's keys under `prefix` (at `revision`, or now), as the etcd3 client's range gives them. */
async function rangeAt(client: Etcd3, prefix: string, revision?: number): Promise<Kv[]> {
  const res = await client.kv.range({
    key: Buffer.from(prefix),
    range_end: rangeEnd(prefix),
    ...(revision === undefined ? {} : { revision: String(revision) }),
  });
  return res.kvs.map((kv) => ({
    key: kv.key.toString('base64'),
    value: kv.value.toString('base64'),
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    version: Number(kv.version),
    lease: String(kv.lease),
  }));
}

/** JSON whose int64 leases keep their digits (Node 24 gives a reviver the number's source text). */
const parseExact = (text: string) =>
  JSON.parse(text, function (this: unknown, key: string, value: unknown, context?: { source?: string }) {
    return key === 'lease' && context?.source ? context.source : value;
  } as never);

/** What `etcd-restore get --output json` printed, in the same shape as rangeAt. */
function getKvs(stdout: string): { revision: number; kvs: Kv[] } {
  const doc = parseExact(stdout);
  return {
    revision: doc.header.revision,
    kvs: (doc.kvs ?? []).map((kv: Record<string, unknown>) => ({
      key: kv.key,
      value: kv.value ?? '',
      createRevision: kv.create_revision,
      modRevision: kv.mod_revision,
      version: kv.version,
      lease: String(kv.lease ?? '0'),
    })),
  };
}

/** The rows `etcd-restore log --output json` printed. */
const logRows = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter((l) => l)
    .map((l) => JSON.parse(l));

/** Once the sidecar has stored its first full snapshot and a delta after it: it watches etcd live from then on. */
async function watching(client: Etcd3, url: string): Promise<void> {
  await waitFor(
    'the first full snapshot',
    async () => ((await metric(url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
  );
  await client.put('/warm-up').value('1').exec();
  await firstDelta(url);
}

const sha256 = (value: Buffer) => createHash('sha256').update(value).digest('hex');

describe('etcd-restore log and get on a sidecar store, after etcd compacted the history away (real etcd, processes)', () => {
  const at = tempDir('restore-log-get-');
  let cluster: TestCluster;
  let client: Etcd3;
  const store = () => `file://${at('store')}`;
  const prefix = '/registry/configmaps/prod/';
  /** The bad write: `etcdctl del --prefix /registry/configmaps/prod/`, its revision and what it deleted. */
  let badRevision: number;
  let deleted: number;
  let before: Kv[];
  let afterwards: Kv[];
  /** Each value put, by the revision that put it. */
  const values = new Map<number, Buffer>();
  let leaseId: string;

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
    let sidecar: SidecarProcess | undefined;
    try {
      sidecar = await startSidecar({ endpoint: cluster.endpoints[0], store: store(), dir: at('sidecar') });
      await watching(client, sidecar.url);
      leaseId = String((await client.leaseClient.leaseGrant({ TTL: 3600 })).ID);
      const put = async (key: string, value: Buffer, lease?: string) => {
        const res = await client.kv.put({ key: Buffer.from(key), value, ...(lease ? { lease } : {}) });
        values.set(Number(res.header.revision), value);
      };
      for (let i = 0; i < 10; i++) await put(`${prefix}cm-${i}`, Buffer.from(`{"data":"v${i}"}`));
      // a value as Kubernetes stores objects: protobuf behind "k8s\0", not text
      await put(`${prefix}cm-bin`, Buffer.from([0x6b, 0x38, 0x73, 0x00, 0x0a, 0xff, 0x10, 0x01]));
      await put(`${prefix}cm-leased`, Buffer.from('leased'), leaseId);
      await put(`${prefix}cm-3`, Buffer.from('{"data":"v3 again"}'));
      await put(`${prefix}cm-3`, Buffer.from('{"data":"v3 once more"}'));
      await put('/registry/configmaps/dev/cm-0', Buffer.from('dev'));
      const head = await etcdRevision(client);
      before = await rangeAt(client, prefix, head);
      const del = await client.kv.deleteRange({ key: Buffer.from(prefix), range_end: rangeEnd(prefix) });
      badRevision = Number(del.header.revision);
      deleted = Number(del.deleted);
      expect(badRevision).toBe(head + 1);
      // Stored before the cluster goes on, so that the sidecar reads the next writes in a watch response of their own:
      // read in one, they share the delete's time to the millisecond, and --since/--until cannot tell them apart.
      await keyspaceOnceStored(client, sidecar.url);
      // the cluster goes on: a key written again, others elsewhere
      await put(`${prefix}cm-1`, Buffer.from('{"data":"recreated"}'));
      await put('/registry/configmaps/dev/cm-1', Buffer.from('dev 1'));
      await keyspaceOnceStored(client, sidecar.url);
      afterwards = await rangeAt(client, prefix);
      expect(await sidecar.stop()).toBe(0);
      sidecar = undefined;
      // as druid's --auto-compaction-retention=2m does: the history before the head is gone from etcd
      await client.kv.compact({ revision: String(await etcdRevision(client)), physical: true });
      await expect(rangeAt(client, prefix, badRevision - 1)).rejects.toThrow(/compacted/);
    } finally {
      await sidecar?.kill();
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  const restoreProgram = (args: string[]) =>
    runProgram('etcd-restore', [args[0], '--store', store(), '--temp-dir', at(), ...args.slice(1)]);

  it('log --prefix names the bulk delete: one row, its revision and count; --all lists its keys', async () => {
    const res = await restoreProgram(['log', '--prefix', prefix, '--output', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const rows = logRows(res.stdout);
    // newest first: the key written again after the delete, then the delete
    expect(rows.map((r) => r.revision)).toEqual([...rows.map((r) => r.revision)].sort((a, b) => b - a));
    expect(rows[0]).toMatchObject({ revision: badRevision + 1, type: 'put', key: `${prefix}cm-1`, version: 1 });
    const bulk = rows.filter((r) => r.type === 'delete');
    expect(bulk).toEqual([
      expect.objectContaining({
        revision: badRevision,
        type: 'delete',
        count: deleted,
        key: `${prefix}cm-`,
        resource: 'configmaps',
        namespace: 'prod',
        // the sidecar watched it live: the time is when etcd wrote it, a watch's delay later
        timeKind: 'live',
      }),
    ]);
    expect(deleted).toBe(12);
    // every put before it, each with its value's size and sha256, its lease, its object apart
    const puts = rows.filter((r) => r.type === 'put' && r.revision < badRevision);
    expect(puts).toHaveLength(14);
    for (const row of puts) {
      const value = values.get(row.revision) as Buffer;
      expect(row).toMatchObject({ valueSize: value.length, valueSha256: sha256(value) });
      expect(row).toMatchObject({ resource: 'configmaps', namespace: 'prod', name: row.key.slice(prefix.length) });
    }
    const leased = rows.find((r) => r.key === `${prefix}cm-leased`);
    expect(leased.lease).toBe(BigInt(leaseId).toString(16).padStart(16, '0'));

    const all = logRows((await restoreProgram(['log', '--prefix', prefix, '--all', '--output', 'json'])).stdout);
    const each = all.filter((r) => r.revision === badRevision);
    expect(each.map((r) => r.key).sort()).toEqual(before.map((kv) => Buffer.from(kv.key, 'base64').toString()).sort());
    expect(each.every((r) => r.type === 'delete' && r.count === undefined)).toBe(true);

    // the table: one line for the delete, the objects apart
    const text = await restoreProgram(['log', '--prefix', prefix]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^REVISION +TIME \(UTC\) +TYPE +SIZE +SHA256 +LEASE +RESOURCE +NAMESPACE +NAME$/m);
    expect(text.stdout).toMatch(
      new RegExp(`^ *${badRevision} +\\S+Z +delete +configmaps +prod +\\* \\(12 keys\\)$`, 'm'),
    );
    expect(text.stdout).toMatch(
      /^16 row\(s\) for keys under \/registry\/configmaps\/prod\/ from \d+ delta\(s\) and v2\/Full-/m,
    );
  });

  it('log narrows by key, revision, time and count, oldest first with --reverse', async () => {
    const key = `${prefix}cm-3`;
    const one = logRows((await restoreProgram(['log', '--key', key, '--reverse', '--output', 'json'])).stdout);
    expect(one.map((r) => [r.type, r.version])).toEqual([
      ['put', 1],
      ['put', 2],
      ['put', 3],
      ['delete', undefined],
    ]);
    expect(one.map((r) => r.valueSha256)).toEqual([
      sha256(Buffer.from('{"data":"v3"}')),
      sha256(Buffer.from('{"data":"v3 again"}')),
      sha256(Buffer.from('{"data":"v3 once more"}')),
      null,
    ]);
    const upTo = logRows(
      (await restoreProgram(['log', '--prefix', prefix, '--to-revision', String(badRevision - 1), '--output', 'json']))
        .stdout,
    );
    expect(upTo.length).toBe(14);
    // the last write before the delete was outside the prefix
    expect(Math.max(...upTo.map((r) => r.revision))).toBe(badRevision - 2);
    const from = logRows(
      (await restoreProgram(['log', '--from-revision', String(badRevision), '--output', 'json'])).stdout,
    );
    expect(from.map((r) => r.revision)).toEqual([badRevision + 2, badRevision + 1, badRevision]);
    const limited = logRows((await restoreProgram(['log', '--limit', '1', '--output', 'json'])).stdout);
    expect(limited).toEqual([
      expect.objectContaining({ revision: badRevision + 2, key: '/registry/configmaps/dev/cm-1' }),
    ]);
    const bad = upTo.length > 0 && from.find((r) => r.revision === badRevision);
    const moment = await restoreProgram(['log', '--since', bad.time, '--until', bad.time, '--output', 'json']);
    expect(logRows(moment.stdout).map((r) => r.revision)).toEqual([badRevision]);
    // nothing but the scratch it removed
    expect(await readdir(at())).not.toContainEqual(expect.stringMatching(/^etcd-restore-/));
  });

  it('get --to-revision <delete - 1> prints what etcd served then, key for key; the restore to it brings back exactly that', async () => {
    const res = await restoreProgram([
      'get',
      ...['--prefix', prefix, '--to-revision', String(badRevision - 1), '--values', '--output', 'json'],
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect(getKvs(res.stdout)).toEqual({ revision: badRevision - 1, kvs: before });
    expect(before).toHaveLength(12);
    expect(before.find((kv) => kv.lease !== '0')?.lease).toBe(leaseId);

    // the same state by the time the log shows for the write before the delete, as --to-time takes it
    const all = logRows((await restoreProgram(['log', '--output', 'json'])).stdout);
    const lastBefore = all.find((r) => r.revision === badRevision - 1);
    const byTime = await restoreProgram([
      ...['get', '--prefix', prefix, '--to-time', lastBefore.time, '--values', '--output', 'json'],
    ]);
    expect(byTime.code, byTime.stderr).toBe(0);
    expect(getKvs(byTime.stdout)).toEqual({ revision: badRevision - 1, kvs: before });

    // the newest state, as etcd serves it now
    const now = await restoreProgram(['get', '--prefix', prefix, '--values', '--output', 'json']);
    expect(getKvs(now.stdout).kvs).toEqual(afterwards);

    // the table: etcdctl's numbers, the values as text where they are
    const text = await restoreProgram([
      'get',
      '--prefix',
      prefix,
      '--to-revision',
      String(badRevision - 1),
      '--values',
    ]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^KEY +CREATE_REVISION +MOD_REVISION +VERSION +LEASE +SIZE +SHA256 +VALUE$/m);
    expect(text.stdout).toMatch(
      /^\/registry\/configmaps\/prod\/cm-3 +\d+ +\d+ +3 +\d+ +[0-9a-f]{12} +\{"data":"v3 once more"\}$/m,
    );
    expect(text.stdout).toMatch(
      /^\/registry\/configmaps\/prod\/cm-bin .*\(binary, 8 bytes: --output json gives it\)$/m,
    );
    expect(text.stdout).toMatch(
      new RegExp(`^12 key\\(s\\) at revision ${badRevision - 1} \\(keys under ${prefix}\\)`, 'm'),
    );
    expect(await readdir(at())).not.toContainEqual(expect.stringMatching(/^etcd-restore-/));

    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const restored = await runProgram('etcd-restore', [
      ...['--store', store(), '--data-dir', at('restored'), '--to-revision', String(badRevision - 1)],
      ...['--name', 'r0', '--initial-advertise-peer-urls', peer, '--initial-cluster-token', 'back'],
    ]);
    expect(restored.code, restored.stderr).toBe(0);
    const [brought] = await readRestored(
      [{ name: 'r0', dataDir: at('restored'), peerPort }],
      { initialCluster: `r0=${peer}`, clusterToken: 'back' },
      (restoredClient) => rangeAt(restoredClient, prefix),
    );
    expect(brought).toEqual(before);
  });

  it('says what is wrong with the command line before reading anything (exit 2)', async () => {
    for (const [args, message] of [
      [['log', '--key', 'a', '--prefix', 'b'], /--key and --prefix both choose the keys/],
      [['log', '--since', 'yesterday'], /--since "yesterday" is not an RFC 3339 time/],
      [['log', '--from-revision', '9', '--to-revision', '3'], /--from-revision 9 is after --to-revision 3/],
      [['log', '--to-revision', '999999'], /--to-revision 999999 is past the newest revision/],
      [['log', '--limit', '0'], /--limit "0" must be a whole number from 1/],
      [['get', '--to-revision', '0'], /--to-revision "0" is not a revision/],
      [['get', '--to-revision', '3', '--to-time', '2026-11-21T22:00:00Z'], /give one/],
    ] as const) {
      const res = await restoreProgram([...args]);
      expect(res.code, `${args.join(' ')}: ${res.stderr}`).toBe(2);
      expect(errors(res.stderr)).toMatch(message);
      expect(res.stdout).toBe('');
    }
  });
});

describe('etcd-restore log and get on other stores (processes)', () => {
  const at = tempDir('restore-log-get-stores-');

  it("reads ebr's store: its deltas, its full snapshot's state, the keys at a revision; a damaged object is passed over and named", async () => {
    const store = `file://${ebrFixture}`;
    const res = await runProgram('etcd-restore', ['log', '--store', store, '--temp-dir', at(), '--output', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const rows = logRows(res.stdout).map((r) => [r.revision, r.type, r.key, r.count ?? 1, r.timeKind]);
    // the chain from the oldest full (revision 3: /x and /y) on; ebr's deltas do not say how their events came
    expect(rows).toEqual([
      [9, 'put', '/z', 1, 'unrecorded'],
      [8, 'delete', '/k1', 1, 'unrecorded'],
      [8, 'put', '/t', 2, 'unrecorded'],
      [7, 'delete', '/x', 1, 'unrecorded'],
      [6, 'put', '/k3', 1, 'unrecorded'],
      [5, 'put', '/k2', 1, 'unrecorded'],
      [4, 'put', '/k1', 1, 'unrecorded'],
      [2, 'put', '/x', 1, 'snapshot'],
      [3, 'put', '/y', 1, 'snapshot'],
    ]);
    const text = await runProgram('etcd-restore', ['log', '--store', store, '--temp-dir', at()]);
    expect(text.stdout).toMatch(/^times are when the sidecar received each event; some deltas do not record/m);

    const get = await runProgram('etcd-restore', [
      ...['get', '--store', store, '--temp-dir', at(), '--to-revision', '7', '--values', '--output', 'json'],
    ]);
    expect(get.code, get.stderr).toBe(0);
    const { revision, kvs } = getKvs(get.stdout);
    expect(revision).toBe(7);
    expect(
      kvs.map((kv) =>
        [kv.key, kv.value].map((b) => Buffer.from(b, 'base64').toString()).concat(String(kv.modRevision)),
      ),
    ).toEqual([
      ['/k1', 'v1', '4'],
      ['/k2', 'v2', '5'],
      ['/k3', 'v3', '6'],
      ['/y', '2', '3'],
    ]);

    // a damaged delta: its revisions are named, the rest shown
    const copy = at('damaged');
    await runProgram('etcd-copy-backups', ['--from', store, '--to', `file://${copy}`]);
    await writeFile(join(copy, 'v2', 'Incr-00000004-00000007-1795299359.gz'), 'not gzip');
    const damaged = await runProgram('etcd-restore', [
      'log',
      '--store',
      `file://${copy}`,
      '--temp-dir',
      at(),
      '--output',
      'json',
    ]);
    expect(damaged.code, damaged.stderr).toBe(0);
    const items = logRows(damaged.stdout);
    expect(items.find((i) => i.passedOver)).toEqual({
      passedOver: {
        object: 'v2/Incr-00000004-00000007-1795299359.gz',
        fromRevision: 4,
        toRevision: 7,
        reason: expect.stringMatching(/damaged|does not decompress|sha256/),
      },
    });
    expect(items.filter((i) => i.revision !== undefined).map((r) => r.revision)).toEqual([9, 8, 8, 2, 3]);
    // get falls back past a damaged full snapshot, as the restore does, and names it
    const fullDamaged = at('damaged-full');
    await runProgram('etcd-copy-backups', ['--from', store, '--to', `file://${fullDamaged}`]);
    await writeFile(join(fullDamaged, 'v2', 'Full-00000000-00000007-1795299379'), 'not a snapshot');
    const fallback = await runProgram('etcd-restore', ['get', '--store', `file://${fullDamaged}`, '--temp-dir', at()]);
    expect(fallback.code, fallback.stderr).toBe(0);
    expect(fallback.stdout).toMatch(
      /^6 key\(s\) at revision 9 \(every key\), restored from v2\/Full-00000000-00000003-1795299353\.gz and 3 delta\(s\)$/m,
    );
    expect(fallback.stdout).toMatch(/^skipped v2\/Full-00000000-00000007-1795299379: /m);
    const damagedText = await runProgram('etcd-restore', ['log', '--store', `file://${copy}`, '--temp-dir', at()]);
    expect(damagedText.stdout).toMatch(
      /^! revisions 4\.\.7 not shown: v2\/Incr-00000004-00000007-1795299359\.gz could not be read/m,
    );
  });

  it('reads an encrypted store with --encryption-key-file (and says which key it lacks without it); marks the times of writes the sidecar read back after a restart', async () => {
    const cluster = await startCluster();
    let sidecar: SidecarProcess | undefined;
    try {
      const client = cluster.client();
      const keys = at('keys');
      await writeFile(keys, `k1 ${'ab'.repeat(32)}\n`, { mode: 0o400 });
      const store = `file://${at('encrypted')}`;
      const start = () =>
        startSidecar({
          endpoint: cluster.endpoints[0],
          store,
          dir: at('sidecar'),
          args: ['--encryption-key-file', keys],
        });
      sidecar = await start();
      await watching(client, sidecar.url);
      for (let i = 0; i < 5; i++) await client.put(`/secret/${i}`).value(`s${i}`).exec();
      await client.delete().prefix('/secret/').exec();
      await client.put('/secret/0').value('back').exec();
      await keyspaceOnceStored(client, sidecar.url);
      expect(await sidecar.stop()).toBe(0);
      // written while no sidecar watches: the next one reads it back from etcd's history when it starts
      await client.put('/secret/late').value('late').exec();
      sidecar = await start();
      await keyspaceOnceStored(client, sidecar.url);
      await client.put('/secret/live').value('live').exec();
      await keyspaceOnceStored(client, sidecar.url);
      const now = await rangeAt(client, '/secret/');
      expect(await sidecar.stop()).toBe(0);
      sidecar = undefined;

      const keyless = await runProgram('etcd-restore', [
        'log',
        '--store',
        store,
        '--temp-dir',
        at(),
        '--output',
        'json',
      ]);
      expect(keyless.code).toBe(1);
      expect(errors(keyless.stderr)).toMatch(/is encrypted with key "k1": give --encryption-key-file/);

      const log = await runProgram('etcd-restore', [
        ...['log', '--store', store, '--temp-dir', at(), '--prefix', '/secret/', '--output', 'json'],
        ...['--encryption-key-file', keys],
      ]);
      expect(log.code, log.stderr).toBe(0);
      expect(logRows(log.stdout).map((r) => [r.type, r.key, r.count ?? 1, r.timeKind])).toEqual([
        ['put', '/secret/live', 1, 'live'],
        ['put', '/secret/late', 1, 'read-back'],
        ['put', '/secret/0', 1, 'live'],
        ['delete', '/secret/', 5, 'live'],
        ...[4, 3, 2, 1, 0].map((i) => ['put', `/secret/${i}`, 1, 'live']),
      ]);
      const text = await runProgram('etcd-restore', [
        ...['log', '--store', store, '--temp-dir', at(), '--key', '/secret/late', '--encryption-key-file', keys],
      ]);
      expect(text.stdout).toMatch(/^ *\d+ +≤\S+Z +put +4 /m);
      expect(text.stdout).toMatch(/^≤: etcd wrote it at or before that time: read back from its history/m);
      const get = await runProgram('etcd-restore', [
        ...['get', '--store', store, '--temp-dir', at(), '--prefix', '/secret/', '--values', '--output', 'json'],
        ...['--encryption-key-file', keys],
      ]);
      expect(get.code, get.stderr).toBe(0);
      expect(getKvs(get.stdout).kvs).toEqual(now);
    } finally {
      await sidecar?.kill();
      await cluster.stop();
    }
  }, 120_000);
});
