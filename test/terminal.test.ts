import { execFile } from 'node:child_process';
import { cp } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ebrStoreDir } from './fixtures.js';
import { runProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const path = tempDir('terminal-');
const restoreBin = fileURLToPath(new URL('../packages/restore/bin/etcd-restore.js', import.meta.url));
const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** Runs a built program on a pseudo-terminal (util-linux `script`) of 100 columns, as a person at one would; what it showed. */
function onTerminal(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; screen: string }> {
  const command = `stty cols 100 rows 30; exec ${[process.execPath, bin, ...args].map(quote).join(' ')}`;
  return new Promise((resolve) => {
    execFile(
      'script',
      ['-qec', command, '/dev/null'],
      { env: { ...process.env, TERM: 'xterm-256color', ...env, NO_COLOR: env.NO_COLOR ?? '' } },
      (err, stdout) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, screen: stdout }),
    );
  });
}

const ESC = '\x1b';

describe('a restore as a person at a terminal sees it, and as a machine reads it', () => {
  const restoreArgs = async (name: string) => {
    await cp(ebrStoreDir, path(`${name}-store`), { recursive: true });
    return ['--store', `file://${path(`${name}-store`)}`, '--data-dir', path(`${name}-data`)];
  };

  it('on a terminal: a live progress line (phase, bytes or revisions, rate, ETA) under a spinner, and the result in colour', async () => {
    const { code, screen } = await onTerminal(restoreBin, await restoreArgs('tty'));
    expect(code).toBe(0);
    expect(screen).toContain(`${ESC}[?25l`); // the spinner hides the cursor while it spins...
    expect(screen).toMatch(/download\S*\s+\d+\.\d MB\s+100%\s+\d+\.\d MB\/s\s+ETA \d+s/);
    expect(screen).toMatch(/replay\S*\s+revision \d+\/9\s+\d+%\s+\d+ rev\/s/);
    expect(screen).toContain(`${ESC}[32m${ESC}[1mrestored`); // the result's verdict in bold green
    expect(screen).toContain(`${ESC}[?25h`); // ...and shows it again
    expect(screen).not.toContain('{"time"');
  });

  it('with NO_COLOR on a terminal: the same words, with neither colour nor spinner', async () => {
    const { code, screen } = await onTerminal(restoreBin, await restoreArgs('no-color'), { NO_COLOR: '1' });
    expect(code).toBe(0);
    expect(screen).toMatch(/restored \S+ at revision 9 \(6 keys\)/);
    expect(screen).toMatch(/download\s+\d+\.\d MB\s+100%/);
    expect(screen).not.toMatch(new RegExp(`${ESC}\\[[0-9;]*m`));
    expect(screen).not.toContain(`${ESC}[?25l`);
  });

  it('a usage error on a terminal is one red line', async () => {
    const { code, screen } = await onTerminal(restoreBin, ['--data-dir', path('x')]);
    expect(code).toBe(2);
    expect(screen).toContain(`${ESC}[31m${ESC}[1merror: `);
    expect(screen).toContain('Missing required argument: store');
  });

  it('not on a terminal: JSON lines on stderr (progress among them) and plain results on stdout', async () => {
    const result = await runProgram('etcd-restore', await restoreArgs('pipe'));
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^restored \S+ at revision 9/);
    expect(result.stdout).not.toContain(ESC);
    const lines = result.stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines.find((l) => l.level === 'progress' && l.msg === 'download')).toMatchObject({
      percent: '100',
      mb: expect.any(String),
      mbPerSecond: expect.any(String),
    });
  });

  it('--log-level warn leaves out info and progress lines; an unknown level is a usage error', async () => {
    const quiet = await runProgram('etcd-restore', [...(await restoreArgs('quiet')), '--log-level', 'warn']);
    expect(quiet.code).toBe(0);
    expect(quiet.stderr).toBe('');
    const wrong = await runProgram('etcd-restore', [...(await restoreArgs('wrong')), '--log-level', 'debug']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('log-level');
  });

  it('shell completion: a script for bash and zsh, and the flags of a command as completions', async () => {
    const script = await runProgram('etcd-restore', ['completion']);
    expect(script.code).toBe(0);
    expect(script.stdout).toContain('complete -o bashdefault -o default -F');
    const words = await runProgram('etcd-snapshot', ['--get-yargs-completions', 'etcd-snapshot', 'save', '--']);
    expect(words.stdout.split('\n')).toEqual(expect.arrayContaining(['--store', '--endpoints', '--log-level']));
  });
});
