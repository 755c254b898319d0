import { type DeltaEvent, memberList, type WatchBatch, WatchCompactedError, watchRevisions } from '@etcd-steward/core';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

describe('watchRevisions (real etcd)', () => {
  let cluster: TestCluster;
  let client: Etcd3;
  let conn: { endpoints: string[] };

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
    conn = { endpoints: cluster.endpoints };
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  it('delivers every revision from the start revision, whole, and keeps delivering new ones', async () => {
    const lease = client.lease(3600);
    await lease.put('leased').value('v');
    await client.put('a').value('1').exec();
    await client.delete().key('leased').exec();
    await client.kv.txn({
      compare: [],
      success: [
        { request_put: { key: Buffer.from('b'), value: Buffer.from('2') } },
        { request_put: { key: Buffer.from('c'), value: Buffer.from('') } },
      ],
      failure: [],
    });
    const leaseId = await lease.grant();
    lease.release();

    const control = new AbortController();
    const events: DeltaEvent[] = [];
    const batches: WatchBatch[] = [];
    const watching = (async () => {
      for await (const batch of watchRevisions(conn, 2, { signal: control.signal })) {
        batches.push(batch);
        events.push(...batch.events);
        if (events.some((e) => e.key.toString() === 'late')) control.abort(new Error('done'));
      }
    })();
    // Handled from the start: the watch may see 'late' and stop before the put's own answer arrives.
    const stopped = expect(watching).rejects.toThrow('done');
    await new Promise((r) => setTimeout(r, 300));
    await client.put('late').value('x').exec(); // after the watch caught up: the stream stays open
    await stopped;

    const view = events.map((e) => [
      e.type,
      e.key.toString(),
      e.value.toString(),
      e.modRevision,
      e.createRevision,
      e.version,
    ]);
    expect(view).toEqual([
      ['put', 'leased', 'v', 2, 2, 1],
      ['put', 'a', '1', 3, 3, 1],
      ['delete', 'leased', '', 4, 0, 0],
      ['put', 'b', '2', 5, 5, 1],
      ['put', 'c', '', 5, 5, 1],
      ['put', 'late', 'x', 6, 6, 1],
    ]);
    expect(events[0].lease).toBe(leaseId);
    expect(events[1].lease).toBe('0');
    // what etcd held before the watch was created is read back; what it wrote while the watch ran comes live
    const readBack = batches.filter((b) => b.events.length > 0).map((b) => [b.revision, b.readBack]);
    expect(readBack.filter(([revision]) => revision !== 6).every(([, back]) => back)).toBe(true);
    expect(readBack.find(([revision]) => revision === 6)).toEqual([6, false]);
    // a transaction's events arrive in one batch
    expect(
      batches.find((b) => b.events.some((e) => e.key.toString() === 'b'))?.events.map((e) => e.modRevision),
    ).toContain(5);
  });

  it('says when etcd has compacted the revisions it needs', async () => {
    await client.put('x').value('1').exec();
    await client.put('x').value('2').exec();
    const { header } = await client.kv.range({ key: Buffer.from('x') });
    await client.kv.compact({ revision: header.revision, physical: true });
    const watch = watchRevisions(conn, 2);
    const err = await watch.next().catch((e) => e);
    expect(err).toBeInstanceOf(WatchCompactedError);
    expect(err).toMatchObject({ fromRevision: 2, compactRevision: Number(header.revision) });
  });

  it("counts what etcd wrote while the caller paused for over a second as read back: its events' times are late", async () => {
    const put = async (key: string) =>
      Number((await client.kv.put({ key: Buffer.from(key), value: Buffer.from('v') })).header.revision);
    const watch = watchRevisions(conn, (await put('pause')) + 1);
    try {
      // a put may come before etcd created the watch (read back); the next ones come live
      let batch: WatchBatch | undefined;
      for (let i = 0; i < 20 && (!batch || batch.readBack); i++) {
        const next = watch.next();
        await put(`live-${i}`);
        batch = (await next).value as WatchBatch;
      }
      expect(batch?.readBack).toBe(false);
      await new Promise((r) => setTimeout(r, 300));
      const during = await put('paused'); // written while nobody reads
      await new Promise((r) => setTimeout(r, 1_200));
      expect((await watch.next()).value).toMatchObject({ revision: during, readBack: true });
      const after = put('after');
      expect((await watch.next()).value).toMatchObject({ revision: await after, readBack: false });
    } finally {
      await watch.return(undefined);
    }
  });

  it('lists the members with decimal IDs', async () => {
    const members = await memberList(conn);
    expect(members).toHaveLength(1);
    expect(members[0]).toMatchObject({ name: 'm0', clientUrls: cluster.endpoints, isLearner: false });
    expect(members[0].id).toMatch(/^\d+$/);
  });
});
