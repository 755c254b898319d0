/**
 * What every program's command line shares: flags from the command line, the environment and a config file,
 * the etcd and store flags, path checks, runProgram and its exit codes.
 * May use: every other folder.
 */
export * from './config-file.js';
export * from './did-you-mean.js';
export * from './etcd-flags.js';
export * from './flag-sources.js';
export * from './inspection-settings.js';
export * from './local-path.js';
export * from './program.js';
export * from './restore-settings.js';
export * from './retention-settings.js';
