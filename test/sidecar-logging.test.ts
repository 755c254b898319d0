import { setTimeout as sleep } from 'node:timers/promises';
import { createEtcdClient, EtcdProcess, findEtcdBinaries, freePort } from '@etcd-steward/core';
import { expect, it, onTestFinished } from 'vitest';
import { firstDelta, metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-logging-');

const count = (log: string, pattern: RegExp) => log.split('\n').filter((line) => pattern.test(line)).length;

it('logs each state change once, each stored snapshot with its revisions, and "stopped" after the last delta', async () => {
  const binaries = await findEtcdBinaries();
  const member = { binaries, name: 'm0', clientPort: await freePort(), peerPort: await freePort() };
  const options = { ...member, dataDir: at('etcd'), logFile: at('etcd.log') };
  let etcd = await EtcdProcess.start(options);
  onTestFinished(() => etcd.stop().then(() => undefined));
  await etcd.waitHealthy();
  const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
  onTestFinished(() => client.close());
  await client.put('/a').value('1');

  const sidecar = await startSidecar({
    endpoint: etcd.clientUrl,
    store: `file://${at('store')}`,
    dir: at('sidecar'),
    args: ['--output', 'json'],
  });
  onTestFinished(() => sidecar.kill());
  await waitFor(
    'the start-up full snapshot',
    async () => ((await metric(sidecar.url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
  );
  await client.put('/b').value('2');
  await firstDelta(sidecar.url);

  // etcd goes away for several leadership checks (one a second here) and comes back.
  await etcd.stop();
  await waitFor('the outage to be noticed', async () => /etcd is unreachable/.test(await sidecar.log()));
  await sleep(5_000);
  etcd = await EtcdProcess.start(options);
  await etcd.waitHealthy();
  await waitFor('etcd to be back', async () => /etcd is reachable again/.test(await sidecar.log()));
  await client.put('/c').value('3');
  // The shutdown's last delta holds what the sidecar has watched: once the outage broke the watch, wait until
  // it is back, which it says with the first revision it delivers (the watch resumes with a jittered backoff).
  if (/the watch broke off/.test(await sidecar.log())) {
    await waitFor('the watch to be back', async () => /the watch is back/.test(await sidecar.log()));
  }
  expect(await sidecar.stop()).toBe(0);

  const log = await sidecar.log();
  expect(count(log, /etcd is unreachable/)).toBe(1);
  expect(count(log, /etcd is reachable again/)).toBe(1);
  expect(count(log, /leadership gained/)).toBe(1);
  expect(count(log, /the watch broke off/)).toBeLessThanOrEqual(1);
  const lines = log
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { msg: string; name?: string; startRevision?: number; lastRevision?: number });
  const fulls = lines.filter((l) => l.msg === 'full snapshot saved');
  const deltas = lines.filter((l) => l.msg === 'delta snapshot saved');
  expect(fulls.length).toBeGreaterThan(0);
  expect(deltas.length).toBeGreaterThanOrEqual(2);
  for (const d of deltas) {
    expect(d.name).toMatch(/Incr-\d{8}-\d{8}-/);
    expect(d.lastRevision).toBeGreaterThanOrEqual(d.startRevision ?? Number.POSITIVE_INFINITY);
  }
  // The put after the outage went into the shutdown's last delta, logged before the last line.
  const revisionOfC = Number((await client.get('/c').exec()).header.revision);
  expect(deltas.at(-1)?.lastRevision).toBe(revisionOfC);
  expect(lines.at(-1)?.msg).toBe('stopped');
});
