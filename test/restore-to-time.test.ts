import { cp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Etcd3, keyspaceFingerprint } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it } from 'vitest';
import { runProgram } from './run-program.js';
import { firstDelta, keyspaceOnceStored, type SidecarProcess, startSidecar } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('restore-to-time-');

/** A write's revision, and when it was sent and when its answer came (ms since the epoch). */
interface Write {
  revision: number;
  sent: number;
  answered: number;
}

/**
 * One write at a time, 250 ms apart, each recorded: between one write's answer and the next one's sending, etcd
 * holds exactly that write's revision (when nothing else writes, which the test checks).
 */
function pacedWriter(client: Etcd3) {
  const writes: Write[] = [];
  let stopped = false;
  const running = (async () => {
    for (let i = 0; !stopped; i++) {
      const sent = Date.now();
      const res = await client.kv.put({ key: Buffer.from(`/paced/${i % 50}`), value: Buffer.from(`value ${i}`) });
      writes.push({ revision: Number(res.header.revision), sent, answered: Date.now() });
      await sleep(250);
    }
  })();
  return {
    writes,
    async stop() {
      stopped = true;
      await running;
    },
  };
}

/**
 * A moment between `from` and `to` (ms) at which etcd's revision is known: 150 ms after a write's answer, more than
 * the sidecar's watch takes to receive it even on a busy machine (its times are when it received an event).
 */
function quietMoment(writes: Write[], from: number, to: number): { time: string; revision: number } {
  for (let i = 0; i + 1 < writes.length; i++) {
    const moment = writes[i].answered + 150;
    if (writes[i].answered >= from && moment <= to && moment + 50 < writes[i + 1].sent) {
      return { time: new Date(moment).toISOString(), revision: writes[i].revision };
    }
  }
  throw new Error(`no quiet moment between ${new Date(from).toISOString()} and ${new Date(to).toISOString()}`);
}

it('--to-time restores exactly where the sidecar watched live, and names the revisions it cannot tell apart where it did not (kill -9, 8 s down)', async () => {
  const cluster = await startCluster();
  const store = `file://${at('store')}`;
  const start = () => startSidecar({ endpoint: cluster.endpoints[0], store, dir: at('sidecar') });
  let sidecar: SidecarProcess | undefined;
  try {
    const client = cluster.client();
    const writer = pacedWriter(client);
    sidecar = await start();
    await firstDelta(sidecar.url);
    await sleep(5_000);
    const killedAt = Date.now();
    await sidecar.kill();
    await sleep(8_000); // the writes go on; nobody watches
    const restartedAt = Date.now();
    sidecar = await start();
    await sleep(5_000);
    await writer.stop();
    await keyspaceOnceStored(client, sidecar.url);
    expect(await sidecar.stop()).toBe(0);
    sidecar = undefined;
    const { writes } = writer;
    // nothing but the writer wrote: etcd's revision at any moment is that of the last write answered by then
    expect(writes.filter((w, i) => i > 0 && w.revision !== writes[i - 1].revision + 1)).toEqual([]);

    const plan = (moment: string, ...extra: string[]) =>
      runProgram('etcd-restore', [
        '--store',
        store,
        '--data-dir',
        at('plan'),
        '--to-time',
        moment,
        '--dry-run',
        ...extra,
      ]);

    // A moment in the 8 s nobody watched: the revisions etcd wrote then were read back after the restart, stamped
    // with that later time. The store cannot tell the state then, and says which revisions it may be.
    const down = quietMoment(writes, killedAt + 3_000, killedAt + 5_000);
    const refused = await plan(down.time, '--output', 'json');
    expect(refused.code).toBe(1);
    const { uncertain } = JSON.parse(refused.stdout).chains[0];
    expect(uncertain).toBeDefined();
    const { known, readBack } = uncertain;
    // the newest revision recorded by then is older than etcd's state then, which lies in the interval named
    expect(known.revision).toBeLessThan(down.revision);
    expect(readBack).toMatchObject({ from: known.revision + 1 });
    expect(readBack.to).toBeGreaterThanOrEqual(down.revision);
    expect(Date.parse(known.at)).toBeLessThanOrEqual(killedAt);
    expect(Date.parse(readBack.firstSeenAt)).toBeGreaterThanOrEqual(restartedAt);
    expect(refused.stderr).toContain(
      `revision ${known.revision} was known at ${known.at}, revision ${readBack.to} first seen at ${readBack.firstSeenAt}`,
    );
    expect(refused.stderr).toContain(`Pass --allow-partial to restore revision ${known.revision}`);
    const text = await plan(down.time);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(`chain: reaches revision ${known.revision}, `);
    expect(text.stdout).toContain(
      `not watched live: ${down.time.replace('Z', '000000Z')} falls in a stretch the sidecar did not watch live`,
    );
    expect(text.stdout).toContain(`the state then is one of revisions ${known.revision}..${readBack.to}`);

    // Accepting the older bound restores it, and says what it could not tell.
    const partial = await runProgram('etcd-restore', [
      '--store',
      store,
      '--data-dir',
      at('partial'),
      '--to-time',
      down.time,
      '--allow-partial',
      '--output',
      'json',
    ]);
    expect(partial.code).toBe(0);
    const result = JSON.parse(partial.stdout);
    expect(result).toMatchObject({ revision: known.revision, uncertain });
    expect(result.fingerprint).toEqual(await keyspaceFingerprint(client, known.revision));

    // Deltas that record nothing of how their events came (as ebr's, or older ones: here the same store without its
    // metadata) are read as before, to the newest revision recorded by then, with a word that etcd may have been further.
    const bare = at('store-without-metadata');
    await cp(at('store'), bare, { recursive: true });
    await rm(join(bare, '.metadata'), { recursive: true, force: true });
    const args = ['--store', `file://${bare}`, '--data-dir', at('plan'), '--to-time', down.time, '--dry-run'];
    const unrecorded = await runProgram('etcd-restore', args);
    expect(unrecorded.code).toBe(0);
    expect(unrecorded.stdout).toContain(`chain: reaches revision ${known.revision}, `);
    expect(unrecorded.stdout).toMatch(
      new RegExp(
        `note: v2/Incr-\\S+ does not record which of its events the sidecar received live .*: revision ${known.revision} is the newest recorded by .*, and etcd may have been further then`,
      ),
    );

    // Moments the sidecar watched live, before the kill and after the restart: exactly etcd's revision then.
    const live = [
      quietMoment(writes, killedAt - 3_500, killedAt - 2_500),
      quietMoment(writes, restartedAt + 3_000, restartedAt + 4_000),
    ];
    for (const moment of live) {
      const res = await plan(moment.time, '--output', 'json');
      expect(res.code).toBe(0);
      const json = JSON.parse(res.stdout);
      expect(json).toMatchObject({ target: { revision: moment.revision } });
      expect(json.chains[0].uncertain).toBeUndefined();
    }
    const exact = await runProgram('etcd-restore', [
      '--store',
      store,
      '--data-dir',
      at('live'),
      '--to-time',
      live[1].time,
      '--output',
      'json',
    ]);
    expect(exact.code).toBe(0);
    expect(JSON.parse(exact.stdout).fingerprint).toEqual(await keyspaceFingerprint(client, live[1].revision));
  } finally {
    await sidecar?.kill();
    await cluster.stop();
  }
});
