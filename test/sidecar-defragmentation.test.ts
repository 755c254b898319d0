import { LocalStore, listSnapshots, memberStatus } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { metric, type SidecarProcess, startSidecar, startWriter, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-defrag-');

interface LogLine {
  time: string;
  msg: string;
  [field: string]: unknown;
}

it('a scheduled defragmentation runs on every member once per due time, one member at a time, the leader last, while a writer sees no failed write', async () => {
  const cluster = await startCluster({ members: 3 });
  onTestFinished(() => cluster.stop());
  const client = cluster.client();
  // 8 MiB of values, then half of them deleted and the history compacted: ~4 MiB of free pages in every db
  const value = Buffer.alloc(4096, 'x');
  for (let i = 0; i < 2000; i += 100) {
    await Promise.all(
      Array.from({ length: 100 }, (_, j) => client.put(`/big/${String(i + j).padStart(5, '0')}`).value(value)),
    );
  }
  for (let i = 0; i < 2000; i += 2) await client.delete().key(`/big/${String(i).padStart(5, '0')}`);
  const { revision } = await memberStatus({ endpoints: [cluster.endpoints[0]] });
  await client.kv.compact({ revision: String(revision), physical: true });

  const sidecars: SidecarProcess[] = [];
  for (const [i, endpoint] of cluster.endpoints.entries()) {
    const sidecar = await startSidecar({
      endpoint,
      store: `file://${at(`store-${i}`)}`,
      dir: at(`sidecar-${i}`),
      args: [
        '--no-snapshotter',
        '--defragmentation-schedule',
        '*/10 * * * * *',
        '--defrag-min-reclaim',
        '1Mi',
        '--alarm-check-period',
        '0',
      ],
    });
    onTestFinished(() => sidecar.kill());
    sidecars.push(sidecar);
  }
  const writer = startWriter(client, { concurrency: 4 });
  const lines = async (): Promise<LogLine[]> =>
    (await Promise.all(sidecars.map((s) => s.log())))
      .flatMap((log) => log.split('\n'))
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine)
      .sort((a, b) => a.time.localeCompare(b.time));
  const runs = async () => (await lines()).filter((l) => l.msg === 'defragmentation done');
  // the first due time defragments; the next one finds too little to reclaim everywhere
  await waitFor('two due defragmentation runs', async () => (await runs()).length >= 2, 45_000);
  const written = await writer.stop();
  expect(written.writes).toBeGreaterThan(0);
  console.log(
    `defragmentation under a writer: ${written.writes} writes at ${written.perSecond}/s, ${written.transient} refused`,
  );
  expect(written.transient).toBe(0);

  const log = await lines();
  const done = await runs();
  // once per due time (only the leader's sidecar runs the schedule here; two that both lead: the next test)
  expect(new Set(done.map((l) => l.due)).size).toBe(done.length);
  expect(done[0]).toMatchObject({ defragmented: 3, skipped: 0 });
  expect(done[1]).toMatchObject({ defragmented: 0, skipped: 3 });
  // one member at a time, inside the lock: each started after the previous ended
  const started = log.filter((l) => l.msg === 'defragmenting member');
  const ended = log.filter((l) => l.msg === 'member defragmented');
  expect(started.map((l) => l.member).sort()).toEqual(['m0', 'm1', 'm2']);
  for (let i = 0; i < 3; i++) {
    expect(ended[i].member).toBe(started[i].member);
    expect(ended[i].time >= started[i].time).toBe(true);
    if (i > 0) expect(started[i].time >= ended[i - 1].time).toBe(true);
  }
  expect(started.map((l) => l.leader)).toEqual([false, false, true]);
  const acquired = log.find((l) => l.msg === 'etcd lock acquired' && l.job === 'defragmentation')!;
  const released = log.find((l) => l.msg === 'etcd lock released' && l.job === 'defragmentation')!;
  expect(acquired.time <= started[0].time && released.time >= ended[2].time).toBe(true);

  // every db gave back most of the deleted half, measured right before and after its own defragmentation: the
  // writer's puts grow it again in between
  for (const l of ended) {
    console.log(`${l.member}: ${l.dbBytesBefore} → ${l.dbBytesAfter} bytes in ${l.seconds} s`);
    expect(l.dbBytesAfter as number).toBeLessThan((l.dbBytesBefore as number) - 2 * 2 ** 20);
  }
  const counts = await Promise.all(
    sidecars.map((s) => metric(s.url, 'etcdbr_defragmentation_duration_seconds_count', 'succeeded="true"')),
  );
  expect(counts.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).toBe(3);
  const reclaimed = await Promise.all(
    sidecars.map((s) => metric(s.url, 'etcd_snapshot_defragmentation_reclaimed_bytes_total')),
  );
  expect(reclaimed.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).toBeGreaterThan(3 * 2 * 2 ** 20);
  for (const s of sidecars) expect(await s.stop()).toBe(0);
});

it('two sidecars that both lead at one due time (as in a leader change) run it once: one defragments, the other finds it done and skips it', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  // Both on the one member, so both lead and both run every due time of the schedule, at the same moment.
  const sidecars: SidecarProcess[] = [];
  for (const name of ['a', 'b']) {
    const sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at(`store-twice-${name}`)}`,
      dir: at(`sidecar-twice-${name}`),
      args: [
        '--no-snapshotter',
        ...['--defragmentation-schedule', '*/5 * * * * *', '--defrag-min-reclaim', '0'],
        ...['--alarm-check-period', '0'],
      ],
    });
    onTestFinished(() => sidecar.kill());
    sidecars.push(sidecar);
  }
  type Outcome = { sidecar: number; msg: string; due: string; reason?: string };
  const outcomes = async (): Promise<Outcome[]> =>
    (await Promise.all(sidecars.map((s) => s.log()))).flatMap((log, sidecar) =>
      log
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => ({ sidecar, ...(JSON.parse(l) as Omit<Outcome, 'sidecar'>) }))
        .filter((l) => l.msg === 'defragmentation done' || l.msg === 'defragmentation skipped'),
    );
  // A due time both sidecars have an outcome for.
  const due = await waitFor(
    'both sidecars to run one due time',
    async () => {
      const all = await outcomes();
      return all.find((o) => all.some((other) => other.sidecar !== o.sidecar && other.due === o.due))?.due;
    },
    30_000,
  );
  const forDue = (await outcomes()).filter((o) => o.due === due).sort((x, y) => x.msg.localeCompare(y.msg));
  expect(forDue.map((o) => o.msg)).toEqual(['defragmentation done', 'defragmentation skipped']);
  expect(forDue[0].sidecar).not.toBe(forDue[1].sidecar);
  expect(forDue[1].reason).toMatch(new RegExp(`the run due at ${due.replaceAll('.', '\\.')} was done already`));
  const defragmented = await Promise.all(
    sidecars.map((s) => metric(s.url, 'etcdbr_defragmentation_duration_seconds_count', 'succeeded="true"')),
  );
  expect(defragmented.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).toBeGreaterThanOrEqual(1);
  for (const s of sidecars) expect(await s.stop()).toBe(0);
});

it('--full-snapshot-after-defragmentation: a run that defragmented a member is followed by a full snapshot', async () => {
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const storeDir = at('store-after');
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${storeDir}`,
    dir: at('sidecar-after'),
    args: [
      '--defragmentation-schedule',
      '*/5 * * * * *',
      '--defrag-min-reclaim',
      '0',
      '--full-snapshot-after-defragmentation',
      '--alarm-check-period',
      '0',
    ],
  });
  onTestFinished(() => sidecar.kill());
  const fulls = async () => (await listSnapshots(new LocalStore(storeDir))).filter((e) => e.kind === 'Full');
  await waitFor('the start-up full snapshot', async () => (await fulls()).length === 1);
  await waitFor('a full snapshot after defragmentation', async () =>
    /"msg":"full snapshot after defragmentation"/.test(await sidecar.log()),
  );
  expect((await fulls()).length).toBeGreaterThanOrEqual(2);
  const log = await sidecar.log();
  expect(log.indexOf('"msg":"member defragmented"')).toBeLessThan(
    log.indexOf('"msg":"full snapshot after defragmentation"'),
  );
  expect(await sidecar.stop()).toBe(0);
});
