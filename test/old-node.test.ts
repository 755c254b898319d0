// One etcd version: the Node a program starts on, checked before anything else loads.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** The Debian Node that comes first on a machine's PATH here (20 on ours), older than the programs need. */
const OLD_NODE = '/usr/bin/node';
const root = fileURLToPath(new URL('..', import.meta.url));
const needed = Number(/^>=(\d+)$/.exec(JSON.parse(readFileSync(`${root}package.json`, 'utf8')).engines.node)?.[1]);
const oldMajor = existsSync(OLD_NODE)
  ? Number(execFileSync(OLD_NODE, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }))
  : undefined;
const skip =
  oldMajor === undefined
    ? `no ${OLD_NODE} to run the programs with`
    : oldMajor >= needed
      ? `${OLD_NODE} is Node ${oldMajor}, not older than the ${needed} the programs need`
      : undefined;

const bins = [
  'snapshot/bin/etcd-snapshot.js',
  'restore/bin/etcd-restore.js',
  'validate/bin/etcd-validate.js',
  'compact/bin/etcd-compact.js',
  'gc/bin/etcd-gc.js',
  'copy-backups/bin/etcd-copy-backups.js',
  'etcdbrctl/bin/etcdbrctl.js',
];

function run(file: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  return new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) => {
    execFile(file, args, { env }, (err, stdout, stderr) => {
      const failure = err as { code?: unknown; signal?: string | null } | null;
      resolve({
        code: failure ? (typeof failure.code === 'number' ? failure.code : null) : 0,
        signal: failure?.signal ?? null,
        stdout,
        stderr,
      });
    });
  });
}

/** What the program says, as every program says an error when stderr is not a terminal: one JSON line. */
function expectAdvice(result: Awaited<ReturnType<typeof run>>, program: string) {
  expect(result.signal).toBeNull(); // no segmentation fault
  expect(result.code).toBe(2);
  expect(result.stdout).toBe('');
  const lines = result.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  const { level, msg } = JSON.parse(lines[0]);
  expect(level).toBe('error');
  expect(msg).toContain(`${program} needs Node.js ${needed} or newer, and runs on Node.js ${oldMajor}.`);
  expect(msg).toContain(`(${OLD_NODE})`);
  expect(msg).toContain(
    `run ${root}scripts/setup: it installs Node ${needed} into ${root}.tools and prints the PATH line`,
  );
}

describe.skipIf(skip !== undefined)(`on an older Node (${skip ?? OLD_NODE})`, () => {
  it.each(bins)(
    '%s exits 2 saying which Node it needs and how to get it, before loading anything native',
    async (bin) => {
      const program = bin.split('/').at(-1)!.replace(/\.js$/, '');
      expectAdvice(await run(OLD_NODE, [`${root}packages/${bin}`, '--version']), program);
    },
  );

  it("pnpm's launcher in node_modules/.bin, with that Node first on PATH, says the same", async () => {
    const result = await run(`${root}node_modules/.bin/etcd-snapshot`, ['--version'], {
      ...process.env,
      PATH: `/usr/bin:${process.env.PATH}`,
    });
    expectAdvice(result, 'etcd-snapshot');
  });
});
