import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from './temp-dir.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const path = tempDir('install-');

// The install itself (every program into ~/.local/bin, each answering --version with a PATH of system folders)
// is checked where setup runs on its own: scripts/fresh-machine-check, after the demo. Run inside the suite,
// setup's pnpm install and build would work on the tree the other tests run from.
describe('scripts/setup --install', () => {
  it('refuses an argument it does not know with exit 2, installing nothing', async () => {
    const failed = await run('bash', [join(root, 'scripts/setup'), '--instal', path('typo')], {
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: process.env.HOME },
    }).catch((err) => err);
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain('unknown argument --instal');
    await expect(readdir(path('typo'))).rejects.toThrow();
  });
});
