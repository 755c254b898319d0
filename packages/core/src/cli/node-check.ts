import { existsSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The oldest Node.js major the programs run on: the root package.json's `engines.node` (test/old-node.test.ts keeps
 * the two equal).
 */
export const REQUIRED_NODE_MAJOR = 24;

/**
 * Importing this module is the check: its top-level code runs it, so that a bin that imports it first stops before
 * anything else is evaluated. An older Node does not fail cleanly on what follows: the native modules built for Node 24
 * (better-sqlite3, zstd-napi) crash Node 20 with a segmentation fault (exit 139) and not a word. So this module loads
 * nothing but Node's own fs, path and url, and its code runs on any Node that reads ES modules.
 */
const found = process.versions.node;
if (Number(found.split('.')[0]) < REQUIRED_NODE_MAJOR) {
  const program = basename(process.argv[1] ?? 'this program').replace(/\.js$/, '');
  // dist/cli/ → the repository root, where scripts/setup is in a clone (not in the container image, whose Node fits).
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
  const setup = join(root, 'scripts', 'setup');
  const fix = existsSync(setup)
    ? `run ${setup}: it installs Node ${REQUIRED_NODE_MAJOR} into ${join(root, '.tools')} and prints the PATH line that puts it first (see README.md, "Using the programs")`
    : `install Node.js ${REQUIRED_NODE_MAJOR} or newer and put it first on PATH`;
  const msg = `${program} needs Node.js ${REQUIRED_NODE_MAJOR} or newer, and runs on Node.js ${found} (${process.execPath}): ${fix}`;
  // As every program reports an error: a JSON line unless stderr is a terminal. Written synchronously: the process
  // exits at once, before anything more loads.
  writeSync(
    2,
    process.stderr.isTTY
      ? `error: ${msg}\n`
      : `${JSON.stringify({ time: new Date().toISOString(), level: 'error', msg })}\n`,
  );
  process.exit(2);
}
