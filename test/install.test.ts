import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const path = tempDir('install-');
// A user's shell: system folders only, so the launchers cannot lean on the Node or pnpm of this test run.
const userEnv = () => ({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: process.env.HOME });

async function programs(): Promise<string[]> {
  const names: string[] = [];
  for (const dir of await readdir(join(root, 'packages'))) {
    const manifest = await readFile(join(root, 'packages', dir, 'package.json'), 'utf8').catch(() => undefined);
    if (manifest) names.push(...Object.keys(JSON.parse(manifest).bin ?? {}));
  }
  return names.sort();
}

describe('scripts/setup --install', () => {
  it('puts every program into the folder given, each running from any directory with a PATH of system folders', async () => {
    const bin = path('bin');
    const { stderr } = await run('bash', [join(root, 'scripts/setup'), '--install', bin], { env: userEnv() });
    expect(stderr).toContain(`${bin} is not on your PATH`);
    const names = await programs();
    expect(names).toHaveLength(6);
    expect((await readdir(bin)).sort()).toEqual(names);
    const { version } = JSON.parse(await readFile(join(root, 'packages/core/package.json'), 'utf8'));
    for (const name of names) {
      const { stdout } = await run(join(bin, name), ['--version'], { env: userEnv(), cwd: path() });
      expect({ name, version: stdout.trim() }).toEqual({ name, version });
    }
    const { stdout: help } = await run(join(bin, 'etcd-restore'), ['-h'], { env: userEnv(), cwd: path() });
    expect(help).toContain('--store');
  });

  it('refuses an argument it does not know with exit 2, installing nothing', async () => {
    const failed = await run('bash', [join(root, 'scripts/setup'), '--instal', path('typo')], {
      env: userEnv(),
    }).catch((err) => err);
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain('unknown argument --instal');
    await expect(readdir(path('typo'))).rejects.toThrow();
  });
});
