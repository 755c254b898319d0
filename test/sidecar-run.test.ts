import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { keyspaceFingerprint, LocalStore, listSnapshots, memberList } from '@etcd-steward/core';
import { startCluster, writeWorkload } from '@etcd-steward/testing';
import { describe, expect, it } from 'vitest';
import { restoreAndFingerprint } from './restore-program.js';
import {
  chainProblems,
  deltaGaps,
  etcdRevision,
  expectRestored,
  firstDelta,
  keyspaceOnceStored,
  metric,
  type SidecarProcess,
  snapshotsReach,
  startSidecar,
  startWriter,
  waitFor,
} from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);

/** The metrics docs/sidecar.md's table names, with their types (a row may name two of one type). */
async function documentedMetrics(): Promise<{ name: string; type: string }[]> {
  const doc = await readFile(join(import.meta.dirname, '..', 'docs', 'sidecar.md'), 'utf8');
  return doc
    .split('\n')
    .map((row) => row.match(/^\| (`[^|]+`) +\| (counter|gauge|histogram) +\|/))
    .filter((match) => match !== null)
    .flatMap(([, names, type]) => [...names.matchAll(/`([a-z_]+)(\{[^}]*\})?`/g)].map(([, name]) => ({ name, type })));
}

describe('etcd-snapshot run (sidecar as a process, real etcd, steady writes)', () => {
  const at = tempDir('sidecar-run-');

  it('1 member: deltas and fulls form one chain that restores the exact keyspace; the HTTP API answers as ebr', async () => {
    const cluster = await startCluster();
    const storeDir = at('store-1');
    let sidecar: SidecarProcess | undefined;
    try {
      const client = cluster.client();
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${storeDir}`,
        dir: at('sidecar-1'),
      });
      const { url } = sidecar;
      const writer = startWriter(client, { concurrency: 32 });
      await firstDelta(url);

      const full = await fetch(`${url}/snapshot/full`, { method: 'POST' });
      expect(full.status).toBe(200);
      expect(await full.json()).toMatchObject({
        kind: 'Full',
        startRevision: 0,
        isFinal: false,
        prefix: 'v2/',
        compressionSuffix: '.zst',
      });
      // ebr's handlers ignore the method; etcd-wrapper uses GET
      const delta = await fetch(`${url}/snapshot/delta`);
      expect(delta.status).toBe(200);
      expect(await delta.json()).toMatchObject({ kind: 'Incr', isChunk: false });
      await new Promise((r) => setTimeout(r, 4_000));
      const written = await writer.stop();
      console.log(
        `1-member writer: ${written.writes} writes in ${written.seconds.toFixed(1)} s = ${written.perSecond}/s`,
      );

      const source = await keyspaceOnceStored(client, url);
      const latest = await (await fetch(`${url}/snapshot/latest`)).json();
      expect(latest.fullSnapshot).toMatchObject({ kind: 'Full' });
      expect(latest.deltaSnapshots.at(-1)).toMatchObject({ kind: 'Incr', lastRevision: source.revision });

      expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ health: true });
      expect((await fetch(`${url}/snapshot/full`, { method: 'DELETE' })).status).toBe(405);
      expect((await fetch(`${url}/snapshot/full?final=maybe`)).status).toBe(400);
      expect((await fetch(`${url}/snapshot/full?path=/etc/passwd`)).status).toBe(400);
      expect((await fetch(`${url}/../../etc/passwd`)).status).toBe(404);
      // every metric docs/sidecar.md lists, of the components this sidecar runs, with its documented type
      const metrics = await (await fetch(`${url}/metrics`)).text();
      const documented = await documentedMetrics();
      expect(documented.length).toBeGreaterThan(15);
      const switchedOff = /k8s|defragmentation|alarms|nospace|_gc_/; // components this sidecar was not asked for
      for (const { name, type } of documented.filter(({ name }) => !switchedOff.test(name)))
        expect(metrics).toContain(`# TYPE ${name} ${type}`);
      for (const name of ['process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_gc_duration_seconds'])
        expect(metrics).toContain(`# TYPE ${name} `);

      expect(await sidecar.stop()).toBe(0);
      sidecar = undefined;
      const store = new LocalStore(storeDir);
      expect(chainProblems(await listSnapshots(store))).toEqual([]);
      expect((await expectRestored(store, at('restore-1'), source)).deltas).toBeGreaterThan(0);

      // While no sidecar watched, etcd moved on and compacted its history: the next start cannot watch from
      // where the store ends, says so and takes a full snapshot at once. Then SIGTERM with --final-snapshot.
      for (let i = 0; i < 50; i++) await client.put(`/after/${i}`).value('x').exec();
      const compactedAt = await etcdRevision(client);
      await client.kv.compact({ revision: String(compactedAt), physical: true });
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${storeDir}`,
        dir: at('sidecar-1'),
        args: ['--final-snapshot'],
      });
      await waitFor(
        'a full snapshot after compaction',
        async () => (await metric(sidecar!.url, 'etcd_snapshot_watch_compacted_total')) === 1,
      );
      await waitFor('the full snapshot', () => snapshotsReach(sidecar!.url, compactedAt));
      expect(await sidecar.log()).toMatch(/etcd compacted its history past the revision the next delta needs/);
      expect(await sidecar.stop()).toBe(0);
      sidecar = undefined;
      const after = await listSnapshots(store);
      expect(after.filter((e) => e.kind === 'Full' && e.lastRevision === compactedAt).map((e) => e.final)).toEqual([
        false,
        true,
      ]);
      expect(chainProblems(after)).toEqual([]);
    } finally {
      await sidecar?.kill();
      await cluster.stop();
    }
  });

  it('full snapshots taken under writes leave every revision in a delta: with the newest full damaged the restore falls back and is exact, and so is --to-revision between any two fulls', async () => {
    const cluster = await startCluster();
    const storeDir = at('store-cover');
    let sidecar: SidecarProcess | undefined;
    try {
      const client = cluster.client();
      // ~30 MB, so that a full snapshot takes long enough for several deltas to be written meanwhile
      await writeWorkload(client, { keys: 30_000, valueSize: 1024, prefix: '/big/' });
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${storeDir}`,
        dir: at('sidecar-cover'),
        // a delta every few hundred ms: some are written while each full snapshot streams
        args: ['--delta-snapshot-memory-limit', '64Ki'],
      });
      const { url } = sidecar;
      await waitFor('the start-up full snapshot', () => snapshotsReach(url, 1));
      const writer = startWriter(client, { concurrency: 4 });
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 500));
        expect((await fetch(`${url}/snapshot/full`, { method: 'POST' })).status).toBe(200);
      }
      await new Promise((r) => setTimeout(r, 500));
      await writer.stop();
      const source = await keyspaceOnceStored(client, url);
      expect(await sidecar.stop()).toBe(0);
      sidecar = undefined;
      const store = new LocalStore(storeDir);
      const entries = await listSnapshots(store);
      expect(chainProblems(entries)).toEqual([]);
      expect(deltaGaps(entries)).toEqual([]);
      const fulls = entries.filter((e) => e.kind === 'Full').sort((a, b) => a.lastRevision - b.lastRevision);
      expect(fulls.length).toBeGreaterThanOrEqual(4);

      // One byte of the newest full snapshot flipped: the restore takes the one before and every delta after it.
      const newest = fulls.at(-1)!;
      const file = join(storeDir, newest.name);
      const bytes = await readFile(file);
      bytes[bytes.length >> 1] ^= 0xff;
      await writeFile(file, bytes);
      const fellBack = await restoreAndFingerprint(`file://${storeDir}`, at('restore-cover'), 'fallback');
      expect(fellBack.result.snapshot).not.toContain(newest.name.replace(/^v2\//, ''));
      expect(fellBack.fingerprint).toEqual(source);

      // Every window between two full snapshots restores to a revision inside it, as etcd held it then.
      for (const [i, full] of fulls.slice(0, -1).entries()) {
        const revision = Math.floor((full.lastRevision + fulls[i + 1].lastRevision) / 2) + 1;
        const restored = await restoreAndFingerprint(`file://${storeDir}`, at('restore-cover'), `window-${i}`, [
          '--to-revision',
          String(revision),
        ]);
        expect(restored.fingerprint).toEqual(await keyspaceFingerprint(client, revision));
      }
    } finally {
      await sidecar?.kill();
      await cluster.stop();
    }
  }, 300_000); // ~30 MB written, four full snapshots and five restores: ~40 s alone, minutes on a loaded machine

  it('a restart after the final full snapshot takes no second one at the same revision', async () => {
    const cluster = await startCluster();
    const storeDir = at('store-final');
    let sidecar: SidecarProcess | undefined;
    try {
      const client = cluster.client();
      const args = ['--final-snapshot'];
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${storeDir}`,
        dir: at('sc-f1'),
        args,
      });
      await waitFor('the start-up full snapshot', () => snapshotsReach(sidecar!.url, 1));
      await writeWorkload(client, { keys: 50, valueSize: 64, prefix: '/final/' });
      await keyspaceOnceStored(client, sidecar.url);
      expect(await sidecar.stop()).toBe(0);
      sidecar = await startSidecar({
        endpoint: cluster.endpoints[0],
        store: `file://${storeDir}`,
        dir: at('sc-f2'),
        args,
      });
      await waitFor('the sidecar to lead', async () => (await metric(sidecar!.url, 'etcd_snapshot_leader')) === 1);
      await waitFor('its start', async () => /taking snapshots: this sidecar leads/.test(await sidecar!.log()));
      expect(await sidecar.log()).toMatch(/no full snapshot at start-up: the newest one holds etcd's current revision/);
      sidecar.child.kill('SIGKILL');
      sidecar = undefined;
      const fulls = (await listSnapshots(new LocalStore(storeDir))).filter((e) => e.kind === 'Full');
      const revision = await etcdRevision(client);
      expect(fulls.filter((f) => f.lastRevision === revision).map((f) => f.final)).toEqual([true]);
    } finally {
      await sidecar?.kill();
      await cluster.stop();
    }
  });

  it('3 members: only the leader snapshots, a leadership change hands over with no gap or overlap', async () => {
    const cluster = await startCluster({ members: 3 });
    const storeDir = at('store-3');
    const sidecars: SidecarProcess[] = [];
    try {
      const client = cluster.client();
      for (const [i, endpoint] of cluster.endpoints.entries()) {
        sidecars.push(await startSidecar({ endpoint, store: `file://${storeDir}`, dir: at(`sidecar-3-${i}`) }));
      }
      const writer = startWriter(client, { concurrency: 32 });
      const leaderIndex = async () => {
        const flags = await Promise.all(sidecars.map((s) => metric(s.url, 'etcd_snapshot_leader')));
        return flags.filter((f) => f === 1).length === 1 ? flags.indexOf(1) : undefined;
      };
      const first = await waitFor('one leading sidecar', leaderIndex);
      await firstDelta(sidecars[first].url, 'deltas from the leader');
      const follower = sidecars[(first + 1) % 3];
      // Followers pass triggers on to the leader's sidecar, which ebr finds on the same port at the leader's
      // host; every sidecar here shares 127.0.0.1, so the follower reaches itself, refuses a second hop and
      // says where the leader is.
      const refused = await fetch(`${follower.url}/snapshot/full`, { method: 'POST' });
      expect(refused.status).toBe(503);
      expect((await refused.json()).error).toMatch(/does not take snapshots/);

      // Hand the lead to another member while the writes go on.
      const members = await memberList({ endpoints: cluster.endpoints });
      const target = members.find((m) => m.clientUrls[0] !== cluster.endpoints[first])!;
      await run('etcdctl', ['--endpoints', cluster.endpoints[first], 'move-leader', BigInt(target.id).toString(16)], {
        env: { ...process.env, ETCDCTL_API: '3' },
      });
      const second = await waitFor('the lead to move', async () => {
        const i = await leaderIndex();
        return i !== undefined && i !== first ? i : undefined;
      });
      const newLeader = sidecars[second];
      // every sidecar saw the change, its own member's role or not
      for (const s of sidecars) {
        await waitFor('the leader change counted', async () =>
          ((await metric(s.url, 'etcd_snapshot_leader_changes_total')) ?? 0) >= 1 ? true : undefined,
        );
      }
      await firstDelta(newLeader.url, 'deltas from the new leader');
      await new Promise((r) => setTimeout(r, 2_000));
      const written = await writer.stop();
      console.log(
        `3-member writer: ${written.writes} writes in ${written.seconds.toFixed(1)} s = ${written.perSecond}/s, ${written.transient} refused for a moment`,
      );

      const source = await keyspaceFingerprint(client);
      expect(source.revision).toBe(await etcdRevision(client));
      await waitFor('the new leader to reach the last revision', () => snapshotsReach(newLeader.url, source.revision));
      for (const s of sidecars.splice(0)) expect(await s.stop()).toBe(0);

      const entries = await listSnapshots(new LocalStore(storeDir));
      expect(chainProblems(entries)).toEqual([]);
      await expectRestored(new LocalStore(storeDir), at('restore-3'), source);
    } finally {
      await Promise.all(sidecars.map((s) => s.kill()));
      await cluster.stop();
    }
  });
});
