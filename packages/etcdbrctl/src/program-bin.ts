import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProgramName } from './translate.js';

const PACKAGES: Record<ProgramName, string> = {
  'etcd-snapshot': '@etcd-steward/snapshot',
  'etcd-restore': '@etcd-steward/restore',
  'etcd-compact': '@etcd-steward/compact',
  'etcd-validate': '@etcd-steward/validate',
  'etcd-copy-backups': '@etcd-steward/copy-backups',
};

/** The program's own command, `bin/<program>.js` beside the package's `dist/`. */
export function programBin(program: ProgramName): string {
  const entry = fileURLToPath(import.meta.resolve(PACKAGES[program]));
  return join(dirname(entry), '..', 'bin', `${program}.js`);
}

const FORWARDED: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/**
 * Runs the program as a child (for etcdbrctl compact, which has more to do once the program is done) with this process's Node, stdio and environment (plus `env`), passing on the
 * signals a kubelet sends; resolves with its exit code (128 + the signal's number when a signal ended it).
 */
export function runProgram(program: ProgramName, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const child = spawn(process.execPath, [programBin(program), ...args], { stdio: 'inherit', env });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  for (const signal of FORWARDED) process.on(signal, forward);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      for (const s of FORWARDED) process.off(s, forward);
      resolve(code ?? 128 + (signal ? constants.signals[signal] : 0));
    });
  });
}

/**
 * Becomes the program (execve: the same PID, so the kubelet's signals reach it directly, its exit code is the
 * container's, and nothing of this process stays in memory beside it). Where this Node cannot replace its process,
 * runs it as a child instead and exits with its code.
 */
export async function becomeProgram(program: ProgramName, args: string[], env: NodeJS.ProcessEnv): Promise<never> {
  const bin = programBin(program);
  if (process.execve) process.execve(process.execPath, [process.execPath, bin, ...args], env);
  process.exit(await runProgram(program, args, env));
}
