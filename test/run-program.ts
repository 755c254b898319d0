import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ProgramResult {
  code: number;
  stdout: string;
  stderr: string;
}

const bins: Record<string, string> = {
  'etcd-snapshot': '../packages/snapshot/bin/etcd-snapshot.js',
  'etcd-restore': '../packages/restore/bin/etcd-restore.js',
  'etcd-validate': '../packages/validate/bin/etcd-validate.js',
  'etcd-compact': '../packages/compact/bin/etcd-compact.js',
  'etcd-gc': '../packages/gc/bin/etcd-gc.js',
  'etcd-copy-backups': '../packages/copy-backups/bin/etcd-copy-backups.js',
};

/**
 * Runs a built program as a user would (a separate Node process), never throwing on a non-zero exit; under the
 * command `wrap` when given (e.g. IN_OWN_PID_NAMESPACE from pid-namespace.ts).
 */
export function runProgram(
  program: keyof typeof bins | string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  wrap: string[] = [],
): Promise<ProgramResult> {
  const bin = fileURLToPath(new URL(bins[program], import.meta.url));
  const [command, ...wrapArgs] = [...wrap, process.execPath];
  return new Promise((resolve) => {
    execFile(
      command,
      [...wrapArgs, bin, ...args],
      { env: { ...process.env, ...env }, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A built program run with `--output json` that must exit 0: its JSON result (else an error with its stderr). */
export async function programJson<T = Record<string, unknown>>(
  program: keyof typeof bins | string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<T> {
  const r = await runProgram(program, [...args, '--output', 'json'], env);
  if (r.code !== 0) throw new Error(`${program} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/** Starts a built program without waiting for it, for tests that stop it midway (SIGTERM, SIGKILL). */
export function startProgram(
  program: keyof typeof bins | string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): ChildProcess {
  const bin = fileURLToPath(new URL(bins[program], import.meta.url));
  return spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** The messages of a program's error log lines (JSON lines: stderr is not a terminal), one a line. */
export function errorMessages(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => line.includes('"level":"error"'))
    .map((line) => JSON.parse(line).msg as string)
    .join('\n');
}
