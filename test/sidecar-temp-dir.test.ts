import { once } from 'node:events';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { freePort } from '@etcd-steward/core';
import { startCluster } from '@etcd-steward/testing';
import { expect, it, onTestFinished } from 'vitest';
import { startProgram } from './run-program.js';
import { metric, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

const at = tempDir('sidecar-temp-dir-');

it('a shared --temp-dir keeps what others put there; the sidecar clears only its own folder', async () => {
  const shared = at('shared-tmp');
  await mkdir(at('shared-tmp', 'someone-else'), { recursive: true });
  await writeFile(at('shared-tmp', 'someone-else', 'work.txt'), 'precious');
  await writeFile(at('shared-tmp', 'notes.txt'), 'precious too');
  const cluster = await startCluster();
  onTestFinished(() => cluster.stop());
  const sidecar = await startSidecar({
    endpoint: cluster.endpoints[0],
    store: `file://${at('store')}`,
    dir: at('sidecar'),
    args: ['--temp-dir', shared],
  });
  onTestFinished(() => sidecar.kill());
  await waitFor(
    'the start-up full snapshot',
    async () => ((await metric(sidecar.url, 'etcdbr_snapshot_latest_revision', 'kind="Full"')) ?? 0) > 0,
  );
  expect(await sidecar.stop()).toBe(0);
  expect(await readFile(at('shared-tmp', 'someone-else', 'work.txt'), 'utf8')).toBe('precious');
  expect(await readFile(at('shared-tmp', 'notes.txt'), 'utf8')).toBe('precious too');
  // Its own folder is gone once it stopped.
  expect((await readdir(shared)).sort()).toEqual(['notes.txt', 'someone-else']);
});

it.each([
  ['is the spool dir', (spool: string) => spool],
  ['holds the spool dir', (spool: string) => `${spool}/..`],
])('a --temp-dir that %s: exit 2 with the fix, nothing touched', async (_what, tempOf) => {
  const spool = at('refused', 'spool');
  await mkdir(spool, { recursive: true });
  await writeFile(at('refused', 'spool', 'keep.txt'), 'spooled');
  const child = startProgram('etcd-snapshot', [
    'run',
    '--endpoints',
    `http://127.0.0.1:${await freePort()}`,
    '--store',
    `file://${at('refused-store')}`,
    '--spool-dir',
    spool,
    '--temp-dir',
    tempOf(spool),
    '--server-host',
    '127.0.0.1',
    '--server-port',
    String(await freePort()),
  ]);
  onTestFinished(() => {
    child.kill('SIGKILL');
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const [code] = (await Promise.race([
    once(child, 'exit'),
    new Promise((r) => setTimeout(() => r(['running']), 10_000)),
  ])) as [unknown];
  expect(code).toBe(2);
  expect(stderr).toMatch(/--temp-dir .* holds the spool dir .*: give the sidecar scratch space apart from the spool/);
  expect(await readdir(at('refused', 'spool'))).toEqual(['keep.txt']);
});
