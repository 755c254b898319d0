import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The programs share these flags through core's storeOption; etcd-snapshot list is the smallest user.
const bin = fileURLToPath(new URL('../packages/snapshot/bin/etcd-snapshot.js', import.meta.url));
const list = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [bin, 'list', '--output', 'json', ...args], { env }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });

describe("ebr's store flags", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'store-flags-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('--storage-provider Local --store-container NAME --store-prefix P reads $HOME/NAME/P, as ebr and etcdbrctl do', async () => {
    // a snapshot there, so that the listing shows which folder was read
    const name = 'v2/Full-00000000-00000001-1700000000';
    await mkdir(join(dir, 'backups', 'demo', 'v2'), { recursive: true });
    await writeFile(join(dir, 'backups', 'demo', name), 'x');
    const home = { ...process.env, HOME: dir };
    const ok = await list(
      ['--storage-provider', 'Local', '--store-container', 'backups', '--store-prefix', 'demo'],
      home,
    );
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject([{ name }]);
    // ebr (v0.25 and later) joins even an absolute container to the home folder; a --store URL names any folder
    const absolute = await list(
      ['--storage-provider', 'Local', '--store-container', '/backups', '--store-prefix', 'demo'],
      home,
    );
    expect(absolute.code).toBe(0);
    expect(JSON.parse(absolute.stdout)).toMatchObject([{ name }]);
  });

  it('refuses unknown providers and both ways at once, with exit 2', async () => {
    const unknown = await list(['--storage-provider', 'FTP', '--store-container', 'c']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/use one of S3, GCS, ABS, Swift, OSS, ECS, OCS, Local/);
    // A provider ebr has, without its credentials: said before anything is tried.
    const noCredentials = await list(['--storage-provider', 'Swift', '--store-container', 'c'], {
      PATH: process.env.PATH,
    });
    expect(noCredentials.code).toBe(2);
    expect(noCredentials.stderr).toMatch(/swift:\/\/c: .*no authURL: set OPENSTACK_APPLICATION_CREDENTIALS/);
    const both = await list(['--storage-provider', 'Local', '--store-container', dir, '--store', `file://${dir}`]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/not both/);
    const none = await list([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/store/);
  });
});
