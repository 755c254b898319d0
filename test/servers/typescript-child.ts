import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';

/**
 * Node arguments to run a TypeScript source file in a child process: type transformation (the sources use
 * parameter properties, which plain type stripping refuses) and the `.js` → `.ts` resolve hook.
 */
export function typescriptNodeArgs(): string[] {
  return [
    '--experimental-transform-types',
    '--disable-warning=ExperimentalWarning',
    '--import',
    new URL('./typescript-hooks.ts', import.meta.url).href,
  ];
}

export function spawnTypescript(file: string, args: string[], options: SpawnOptions = {}): ChildProcess {
  return spawn(process.execPath, [...typescriptNodeArgs(), file, ...args], options);
}
