import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type CatalogEntry,
  checkStoreHistory,
  compactHistory,
  compareStoredRevision,
  type DeltaEvent,
  deltaAgreesThrough,
  LocalStore,
  listSnapshots,
  METADATA_REVISION_DIGEST,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { startCluster, storeDeltas, type TestCluster, watchEvents } from '@etcd-steward/testing';
import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/*
 * etcd's compaction at revision R keeps R's puts and drops R's deletes: what the store holds of R must still be
 * told the same as etcd's, never "different" nor "unreachable", because etcd compacted at exactly R.
 */
describe('a stored revision against etcd compacted at that very revision (real etcd)', () => {
  let cluster: TestCluster;
  let client: Etcd3;
  let conn: { endpoints: string[] };
  let dir: string;
  let stores = 0;

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
    conn = { endpoints: cluster.endpoints };
    dir = await mkdtemp(join(tmpdir(), 'compacted-revision-'));
  });
  afterAll(async () => {
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const revisionNow = async () => Number((await client.kv.range({ key: Buffer.from([0]) })).header.revision);
  const newStore = () => new LocalStore(join(dir, `store-${++stores}`));

  /** Three keys and one kept under `prefix`, then at one revision the keys deleted, or a txn of a put and a delete. */
  async function writeRevision(prefix: string, kind: 'deletes' | 'txn'): Promise<number> {
    for (const k of ['a', 'b', 'c', 'kept']) await client.put(`${prefix}${k}`).value(`${k}-1`).exec();
    if (kind === 'deletes') {
      await client.kv.deleteRange({ key: Buffer.from(`${prefix}a`), range_end: Buffer.from(`${prefix}d`) });
    } else {
      await client.kv.txn({
        compare: [],
        success: [
          { request_put: { key: Buffer.from(`${prefix}a`), value: Buffer.from('a-2') } },
          { request_delete_range: { key: Buffer.from(`${prefix}b`) } },
        ],
        failure: [],
      });
    }
    return revisionNow();
  }

  /** A full snapshot of etcd now, and one delta of `events`, in a store of their own; its snapshots. */
  async function storeOf(
    events: readonly DeltaEvent[],
  ): Promise<{ store: LocalStore; full: CatalogEntry; delta: CatalogEntry }> {
    const store = newStore();
    await takeFullSnapshot({ connection: conn, store, compression: 'gzip', tempDir: dir });
    await storeDeltas(store, events, { startRevision: events[0].modRevision });
    const entries = await listSnapshots(store);
    const full = entries.find((e) => e.kind === 'Full') as CatalogEntry;
    const delta = entries.find((e) => e.kind === 'Incr') as CatalogEntry;
    return { store, full, delta };
  }

  /** `events` with those of `revision` changed by `forge`. */
  const forged = (events: readonly DeltaEvent[], revision: number, forge: (e: DeltaEvent) => DeltaEvent) =>
    events.map((e) => (e.modRevision === revision ? forge(e) : e));

  it("a delta holding etcd's deletes (and a txn's put and delete) at the compacted revision is the same; one holding other writes there differs; a full snapshot's digest there cannot be told", async () => {
    for (const kind of ['deletes', 'txn'] as const) {
      const prefix = `/older-${kind}/`;
      const from = (await revisionNow()) + 1;
      const revision = await writeRevision(prefix, kind);
      const events = await watchEvents(client, from, revision);
      const real = await storeOf(events);
      const other = await storeOf(
        forged(events, revision, (e) =>
          e.type === 'delete'
            ? { ...e, key: Buffer.from(`${prefix}kept`) }
            : { ...e, value: Buffer.from('not etcd value') },
        ),
      );
      await client.put(`${prefix}later`).value('x').exec();
      await compactHistory(conn, revision);

      expect(await compareStoredRevision(real.store, real.delta, conn, dir), kind).toBe('same');
      expect(await compareStoredRevision(other.store, other.delta, conn, dir), kind).toBe('different');
      expect(await compareStoredRevision(real.store, real.full, conn, dir), kind).toBe('compacted');
    }
  });

  it("at etcd's current revision, compacted there, the comparison answers at once, and a full snapshot taken then records no digest without waiting", async () => {
    const from = (await revisionNow()) + 1;
    const revision = await writeRevision('/current/', 'deletes');
    const { store, full, delta } = await storeOf(await watchEvents(client, from, revision));
    await compactHistory(conn, revision);
    expect(await revisionNow()).toBe(revision);

    for (const [entry, expected] of [
      [delta, 'same'],
      [full, 'compacted'],
    ] as const) {
      const started = Date.now();
      expect(await compareStoredRevision(store, entry, conn, dir), entry.kind).toBe(expected);
      expect(Date.now() - started, entry.kind).toBeLessThan(1_000);
    }

    const later = newStore();
    const started = Date.now();
    const saved = await takeFullSnapshot({ connection: conn, store: later, compression: 'gzip', tempDir: dir });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(saved.revision).toBe(revision);
    expect((await later.stat(saved.ref.name))?.metadata).not.toHaveProperty(METADATA_REVISION_DIGEST);
  });

  it('a delta that starts at the compacted revision agrees with etcd through its last revision', async () => {
    await client.put('/start/x').value('1').exec();
    const revision = await writeRevision('/start/', 'deletes');
    for (let i = 0; i < 3; i++) await client.put(`/start/after-${i}`).value('v').exec();
    const last = await revisionNow();
    const store = newStore();
    await storeDeltas(store, await watchEvents(client, revision, last), { startRevision: revision });
    const [delta] = await listSnapshots(store);
    await compactHistory(conn, revision);

    expect(await deltaAgreesThrough(store, delta, conn, last, dir)).toBe(last);
  });

  it("the history check of a store whose newest delta ends at etcd's compact revision: it continues", async () => {
    const store = newStore();
    const full = await takeFullSnapshot({ connection: conn, store, compression: 'gzip', tempDir: dir });
    const revision = await writeRevision('/history/', 'txn');
    await storeDeltas(store, await watchEvents(client, full.revision + 1, revision), {
      startRevision: full.revision + 1,
    });
    await compactHistory(conn, revision);

    const verdict = await checkStoreHistory({
      store,
      entries: await listSnapshots(store),
      connection: conn,
      scratchDir: dir,
    });
    expect(verdict).toEqual({ kind: 'continues', checkedRevision: revision });
  });

  it('past the compacted revision, what etcd holds now tells a delta of its history from another one, as far as it can', async () => {
    const from = (await revisionNow()) + 1;
    const revision = await writeRevision('/past/', 'txn');
    const events = await watchEvents(client, from, revision);
    const real = await storeOf(events);
    // Another history put another value at that revision, and deleted a key etcd keeps to this day.
    const other = await storeOf(
      forged(events, revision, (e) =>
        e.type === 'delete' ? { ...e, key: Buffer.from('/past/kept') } : { ...e, value: Buffer.from('not etcd') },
      ),
    );
    for (let i = 0; i < 3; i++) await client.put(`/past/after-${i}`).value('v').exec();
    await compactHistory(conn, await revisionNow());

    expect(await compareStoredRevision(real.store, real.delta, conn, dir)).toBe('same');
    expect(await compareStoredRevision(other.store, other.delta, conn, dir)).toBe('different');
    // Every key the revision named written again since: nothing is left to tell by.
    await client.put('/past/a').value('a-3').exec();
    await compactHistory(conn, await revisionNow());
    expect(await compareStoredRevision(real.store, real.delta, conn, dir)).toBe('compacted');
  });
});
