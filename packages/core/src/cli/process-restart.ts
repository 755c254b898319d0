import { withoutPassword } from './password-argument.js';

/**
 * Set with a password moved off the command line: the flag it was given with, so that a command without
 * `--password` still refuses it as an unknown argument (flag-sources.ts) rather than finding it in its environment.
 */
export const PASSWORD_MOVED_FROM = 'ETCD_STEWARD_PASSWORD_MOVED_FROM';

/** Node flags and environment variables a program runs with. */
export interface ProcessSettings {
  nodeFlags: readonly string[];
  env: Readonly<Record<string, string>>;
}

/**
 * Runs this program again in the same process (execve: same PID, arguments and environment) with the settings it
 * lacks, since V8 and malloc read them only at start-up, and without an etcd password on its command line: every
 * user of the machine can read a process's arguments, not its environment, so the password moves to
 * ETCD_STEWARD_PASSWORD on the way (and is itself a reason to start again). Every program that takes `--password`
 * calls it from its bin before anything loads, so that the restart costs a bare Node start-up, not the loading of
 * its modules twice; this module imports nothing but the password's parser for the same reason. What the user set
 * wins: a flag on node's command line or in NODE_OPTIONS, a variable in the environment. Returns when there is
 * nothing to do, or when this Node cannot replace its process (the program then runs with the defaults, and the
 * password where it was given).
 */
export function ensureProcessSettings(settings: ProcessSettings = { nodeFlags: [], env: {} }): void {
  const { nodeFlags, env } = settings;
  const name = (flag: string) => flag.split('=')[0].replaceAll('_', '-');
  const given = new Set([...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].map(name));
  const flags = nodeFlags.filter((flag) => !given.has(name(flag)));
  const vars = Object.entries(env).filter(([variable]) => process.env[variable] === undefined);
  const [script, ...args] = process.argv.slice(1);
  const { argv, password, flag } = withoutPassword(args);
  if ((flags.length === 0 && vars.length === 0 && password === undefined) || !process.execve) return;
  process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, script, ...argv], {
    ...process.env,
    ...Object.fromEntries(vars),
    ...(password === undefined ? {} : { ETCD_STEWARD_PASSWORD: password, [PASSWORD_MOVED_FROM]: flag }),
  });
}
