import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEtcdClient, EtcdProcess, findEtcdBinaries, keyspaceFingerprint } from '@etcd-steward/core';
import { startCluster, type TestCluster, writeWorkload } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProgram } from './run-program.js';

describe('snapshot → restore round trip (programs as processes, real etcd)', () => {
  let cluster: TestCluster;
  let dir: string;
  let store: string;
  let source: { revision: number; keys: number; sha256: string };

  beforeAll(async () => {
    cluster = await startCluster();
    dir = await mkdtemp(join(tmpdir(), 'round-trip-'));
    store = `file://${join(dir, 'store')}`;
    const client = cluster.client();
    await writeWorkload(client, { keys: 20_000, valueSize: 100 });
    source = await keyspaceFingerprint(client);
  });

  afterAll(async () => {
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('restores the exact keyspace and revision', async () => {
    const endpoints = cluster.endpoints.join(',');
    const saved = await runProgram('etcd-snapshot', [
      'save',
      '--endpoints',
      endpoints,
      '--store',
      store,
      '--output',
      'json',
    ]);
    expect(saved.stderr).not.toMatch(/"level":"error"/);
    expect(saved.code).toBe(0);
    const summary = JSON.parse(saved.stdout);
    expect(summary.revision).toBe(source.revision);
    expect(summary.name).toMatch(
      new RegExp(`^v2/Full-00000000-${String(source.revision).padStart(8, '0')}-\\d+\\.zst$`),
    );

    const listed = await runProgram('etcd-snapshot', ['list', '--store', store]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(summary.name);

    const dataDir = join(dir, 'restored');
    const restored = await runProgram('etcd-restore', [
      '--store',
      store,
      '--data-dir',
      dataDir,
      '--name',
      'r0',
      '--output',
      'json',
    ]);
    expect(restored.stderr).not.toMatch(/"level":"error"/);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ revision: source.revision, snapshot: summary.name });
    // no scratch dirs left beside the target
    expect((await readdir(dir)).sort()).toEqual(['restored', 'store']);

    const etcd = await EtcdProcess.start({
      binaries: await findEtcdBinaries(),
      name: 'r0',
      dataDir,
      logFile: join(dir, 'restored-etcd.log'),
    });
    try {
      await etcd.waitHealthy();
      const client = createEtcdClient({ endpoints: [etcd.clientUrl] });
      try {
        expect(await keyspaceFingerprint(client)).toEqual(source);
      } finally {
        client.close();
      }
    } finally {
      await etcd.stop();
    }
  });

  it('never replaces a snapshot: four saves in quick succession leave four objects', async () => {
    const quick = join(dir, 'quick-store');
    const endpoints = cluster.endpoints.join(',');
    const names: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await runProgram('etcd-snapshot', [
        'save',
        '--endpoints',
        endpoints,
        '--store',
        `file://${quick}`,
        '--compression',
        'none',
        '--output',
        'json',
      ]);
      expect(res.code).toBe(0);
      names.push(JSON.parse(res.stdout).name);
    }
    expect(new Set(names).size).toBe(4);
    expect((await readdir(join(quick, 'v2'))).sort()).toEqual(names.map((n) => n.slice(3)).sort());
  });

  it('save prints the name, revision and both sizes; list gives one order (time taken) and the same fields as text and JSON', async () => {
    const listed = join(dir, 'listed-store');
    const endpoints = cluster.endpoints.join(',');
    const saved = await runProgram('etcd-snapshot', ['save', '--endpoints', endpoints, '--store', `file://${listed}`]);
    expect(saved.code).toBe(0);
    expect(saved.stdout).toMatch(
      new RegExp(
        `^saved file://.*/v2/Full-\\S+\\.zst \\(revision ${source.revision}, db [\\d.]+ MiB, stored [\\d.]+ [KM]iB\\)\\n$`,
      ),
    );
    // ebr's delta ending where the next full snapshot begins: same last revision, taken earlier
    const savedName = (await readdir(join(listed, 'v2')))[0];
    const savedAt = Number(/-(\d+)\.zst$/.exec(savedName)![1]);
    const delta = `Incr-${String(source.revision - 5).padStart(8, '0')}-${String(source.revision).padStart(8, '0')}-${savedAt - 30}.gz`;
    await writeFile(join(listed, 'v2', delta), Buffer.alloc(2048));

    const json = await runProgram('etcd-snapshot', ['list', '--store', `file://${listed}`, '--output', 'json']);
    expect(json.code).toBe(0);
    const entries = JSON.parse(json.stdout);
    expect(entries.map((e: { name: string }) => e.name)).toEqual([`v2/${delta}`, `v2/${savedName}`]);
    expect(entries[0]).toEqual({
      kind: 'Incr',
      startRevision: source.revision - 5,
      lastRevision: source.revision,
      taken: new Date((savedAt - 30) * 1000).toISOString().replace('.000Z', 'Z'),
      bytes: 2048,
      compression: 'gzip',
      final: false,
      name: `v2/${delta}`,
    });
    expect(entries[1].compression).toBe('zstd');

    const text = await runProgram('etcd-snapshot', ['list', '--store', `file://${listed}`]);
    const rows = text.stdout.trim().split('\n');
    expect(rows[0].split(/\s{2,}/)).toEqual([
      'KIND',
      'START',
      'LAST',
      'TAKEN (UTC)',
      'SIZE',
      'COMPRESSION',
      'FINAL',
      'NAME',
    ]);
    expect(rows[1]).toMatch(new RegExp(`^Incr .* 2\\.0 KiB +gzip +v2/${delta}$`));
    expect(rows[2]).toMatch(/^Full .* [\d.]+ [KM]iB +zstd +v2\/Full-/);
  });

  it('refuses bad input with exit 2 and a one-line reason, touching nothing', async () => {
    const endpoints = cluster.endpoints.join(',');
    const scheme = await runProgram('etcd-snapshot', ['save', '--endpoints', endpoints, '--store', 'ftp://x/y']);
    expect(scheme.code).toBe(2);
    expect(scheme.stderr).toMatch(/unknown store scheme .*ftp:/);

    const occupied = join(dir, 'occupied');
    await rm(occupied, { recursive: true, force: true });
    await import('node:fs/promises').then((fs) => fs.mkdir(occupied));
    await writeFile(join(occupied, 'keep'), 'mine');
    const existing = await runProgram('etcd-restore', ['--store', store, '--data-dir', occupied]);
    expect(existing.code).toBe(2);
    expect(existing.stderr).toMatch(/is not empty: pass --force/);
    expect(await readFile(join(occupied, 'keep'), 'utf8')).toBe('mine');

    // A store path that does not exist, or one that cannot exist: exit 2, said plainly, and no folder left behind.
    const missing = join(dir, 'no-such-store');
    const none = await runProgram('etcd-restore', ['--store', `file://${missing}`, '--data-dir', join(dir, 'x')]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/the store's folder \S+no-such-store does not exist/);
    expect(existsSync(missing)).toBe(false);
    const underFile = await runProgram('etcd-snapshot', [
      'save',
      '--endpoints',
      cluster.endpoints.join(','),
      '--store',
      `file://${join(occupied, 'keep', 'store')}`,
    ]);
    expect(underFile.code).toBe(2);
    expect(underFile.stderr).toMatch(/keep is not a directory/);

    const down = await runProgram('etcd-snapshot', [
      'save',
      '--endpoints',
      'http://127.0.0.1:1',
      '--store',
      `file://${join(dir, 'other')}`,
    ]);
    expect(down.code).toBe(1);
    expect(down.stderr.trim().split('\n')).toHaveLength(1);
    expect(down.stderr).toMatch(/cannot reach etcd at http:\/\/127\.0\.0\.1:1/);
  });

  it('falls back from a damaged newest snapshot, and fails cleanly on a truncated one', async () => {
    const badStore = join(dir, 'bad-store');
    const url = `file://${badStore}`;
    const endpoints = cluster.endpoints.join(',');
    expect(
      (await runProgram('etcd-snapshot', ['save', '--endpoints', endpoints, '--store', url, '--compression', 'none']))
        .code,
    ).toBe(0);
    const [good] = await readdir(join(badStore, 'v2'));
    // a newer copy with one bit flipped in the middle of the db
    const bytes = await readFile(join(badStore, 'v2', good));
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(bytes.length / 2)] ^= 0x01;
    const newer = good.replace(/-(\d+)$/, (_, t) => `-${Number(t) + 60}`);
    await writeFile(join(badStore, 'v2', newer), flipped);

    const target = join(dir, 'fallback');
    const res = await runProgram('etcd-restore', ['--store', url, '--data-dir', target, '--output', 'json']);
    expect(res.code).toBe(0);
    const result = JSON.parse(res.stdout);
    expect(result.snapshot).toBe(`v2/${good}`);
    expect(result.skipped).toEqual([{ name: `v2/${newer}`, reason: expect.stringMatching(/sha256/) }]);

    // only a truncated snapshot: a clear failure and no data dir
    const truncStore = join(dir, 'trunc-store');
    await import('node:fs/promises').then((fs) => fs.mkdir(join(truncStore, 'v2'), { recursive: true }));
    await writeFile(join(truncStore, 'v2', good), bytes.subarray(0, bytes.length - 1000));
    const truncTarget = join(dir, 'trunc-target');
    const trunc = await runProgram('etcd-restore', ['--store', `file://${truncStore}`, '--data-dir', truncTarget]);
    expect(trunc.code).toBe(1);
    expect(trunc.stderr).toMatch(/truncated/);
    await expect(readdir(truncTarget)).rejects.toThrow(/ENOENT/);
  });
});
