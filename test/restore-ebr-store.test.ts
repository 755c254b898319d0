import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import { freePort } from '@etcd-steward/core';
import { goLzwCompress, readRestored } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreDir } from './fixtures.js';
import { runProgram } from './run-program.js';

const fixture = ebrStoreDir;

/** The table in the fixture's README.md: key, value, mod_revision, create_revision, version. */
async function expectedKeyspace(): Promise<string[]> {
  const text = await readFile(join(fixture, 'README.md'), 'utf8');
  const block = /```\n([\s\S]*?)```/.exec(text)![1];
  return block
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/).join(' '));
}

describe('etcd-restore on a store written by ebr v0.23 (programs as processes)', () => {
  let dir: string;
  let peerPort: number;
  let expected: string[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'restore-ebr-'));
    peerPort = await freePort();
    expected = await expectedKeyspace();
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function restoreAndRead(store: string, target: string, extra: string[] = []) {
    const peer = `http://127.0.0.1:${peerPort}`;
    const res = await runProgram('etcd-restore', [
      '--store',
      store,
      '--data-dir',
      target,
      '--name',
      'r0',
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster-token',
      'ebr',
      '--output',
      'json',
      ...extra,
    ]);
    expect(res.stderr).not.toMatch(/"level":"error"/);
    expect(res.code).toBe(0);
    const [keyspace] = await readRestored(
      [{ name: 'r0', dataDir: target, peerPort }],
      { initialCluster: `r0=${peer}`, clusterToken: 'ebr' },
      async (client) => {
        const all = await client.kv.range({ key: Buffer.from([0]), range_end: Buffer.from([0]) });
        return {
          revision: Number(all.header.revision),
          rows: all.kvs.map((kv) => `${kv.key} ${kv.value} ${kv.mod_revision} ${kv.create_revision} ${kv.version}`),
        };
      },
    );
    return { result: JSON.parse(res.stdout), keyspace };
  }

  it('restores exactly the keyspace its README.md gives, at revision 9', async () => {
    const { result, keyspace } = await restoreAndRead(`file://${fixture}`, join(dir, 'latest'));
    expect(result).toMatchObject({
      revision: 9,
      keys: 6,
      snapshot: 'v2/Full-00000000-00000007-1795299379',
      deltas: ['v2/Incr-00000008-00000008-1795299383', 'v2/Incr-00000009-00000009-1795299385'],
    });
    expect(keyspace).toEqual({ revision: 9, rows: expected });
  });

  it('reads the legacy v1 layout, lzw (.Z), zlib and gzip, through the older full and the longer chain', async () => {
    // The same history as old ebr versions stored it: v1/Backup-<unix>/<name>, other codecs.
    const store = join(dir, 'v1-store');
    const backup = join(store, 'v1', 'Backup-1795299353');
    await mkdir(backup, { recursive: true });
    const raw = async (name: string) => {
      const bytes = await readFile(join(fixture, 'v2', name));
      return name.endsWith('.gz') ? gunzipSync(bytes) : bytes;
    };
    await writeFile(
      join(backup, 'Full-00000000-00000003-1795299353.Z'),
      goLzwCompress(await raw('Full-00000000-00000003-1795299353.gz')),
    );
    await writeFile(
      join(backup, 'Incr-00000004-00000007-1795299359.zlib'),
      deflateSync(await raw('Incr-00000004-00000007-1795299359.gz')),
    );
    await cp(
      join(fixture, 'v2', 'Incr-00000008-00000008-1795299383'),
      join(backup, 'Incr-00000008-00000008-1795299383'),
    );
    await writeFile(
      join(backup, 'Incr-00000009-00000009-1795299385.gz'),
      gzipSync(await raw('Incr-00000009-00000009-1795299385')),
    );
    const { result, keyspace } = await restoreAndRead(`file://${store}`, join(dir, 'legacy'));
    expect(result.snapshot).toBe('v1/Backup-1795299353/Full-00000000-00000003-1795299353.Z');
    expect(result.deltas).toHaveLength(3);
    expect(keyspace).toEqual({ revision: 9, rows: expected });
  });

  it('restores a point in time by revision', async () => {
    const { result, keyspace } = await restoreAndRead(`file://${fixture}`, join(dir, 'at-8'), ['--to-revision', '8']);
    expect(result.revision).toBe(8);
    expect(keyspace).toEqual({ revision: 8, rows: expected.filter((row) => !row.startsWith('/z ')) });
  });

  it('prints the plan with --dry-run and creates nothing', async () => {
    const target = join(dir, 'dry');
    const res = await runProgram('etcd-restore', ['--store', `file://${fixture}`, '--data-dir', target, '--dry-run']);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('reaches revision 9');
    expect(res.stdout).toMatch(/Full\s+0\.\.7\s+28\.0 KiB\s+v2\/Full-00000000-00000007-1795299379/);
    expect(res.stdout).toMatch(/fallback 1: reaches revision 9, 3 delta/);
    const json = await runProgram('etcd-restore', [
      '--store',
      `file://${fixture}`,
      '--data-dir',
      target,
      '--dry-run',
      '--output',
      'json',
    ]);
    expect(JSON.parse(json.stdout).chains[0].objects.map((o: { name: string }) => o.name)).toEqual([
      'v2/Full-00000000-00000007-1795299379',
      'v2/Incr-00000008-00000008-1795299383',
      'v2/Incr-00000009-00000009-1795299385',
    ]);
    expect((await readdir(dir)).filter((f) => f.includes('dry'))).toEqual([]);
  });
});
