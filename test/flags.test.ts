import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { flagReference } from '../scripts/flag-reference.ts';
import { acceptedFlags, type CommandFlags, programFlags, programs } from '../scripts/program-flags.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/**
 * Each `--flag` of a line that comes after a program's name, with the nearest such name before it: the
 * program it is given to. A glob such as `--keep-*` is no flag.
 */
function flagsAfterPrograms(line: string, programNames: string[]): { program: string; flag: string }[] {
  const names = new RegExp(`(?<![\\w-])(${programNames.join('|')})(?![\\w-])`, 'g');
  // Another command between a program's name and a flag takes the flag: a script, etcd's own tools, ebr's.
  const others = /(?<![\w/-])(?:scripts\/[\w./-]+|etcdctl|etcdutl|etcdbrctl|etcd)(?![\w-])/g;
  const at = [
    ...[...line.matchAll(names)].map((m) => ({ index: m.index, program: m[1] as string | undefined })),
    ...[...line.matchAll(others)].map((m) => ({ index: m.index, program: undefined })),
  ].sort((a, b) => a.index - b.index);
  return [...line.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*[a-z0-9])(?![\w*-])/g)].flatMap((m) => {
    const before = at.filter((p) => p.index < m.index).at(-1);
    return before?.program ? [{ program: before.program, flag: m[1] }] : [];
  });
}

/** A file's lines with their numbers; a shell command continued with `\` is one line. */
function logicalLines(text: string): { line: string; number: number }[] {
  const out: { line: string; number: number }[] = [];
  let pending: { line: string; number: number } | undefined;
  text.split('\n').forEach((line, i) => {
    pending = pending ? { ...pending, line: `${pending.line} ${line}` } : { line, number: i + 1 };
    if (!line.endsWith('\\')) {
      out.push(pending);
      pending = undefined;
    }
  });
  return out;
}

/** `--no-<flag>` is yargs' negation of a yes/no `--<flag>`. */
const unknownTo = (accepted: Set<string>, flag: string) =>
  !accepted.has(flag) && !(flag.startsWith('no-') && accepted.has(flag.slice(3)));

describe("flags named in docs and the reference are the programs' own", () => {
  let all: CommandFlags[];
  beforeAll(() => {
    all = programFlags();
  });

  it("docs/flags.md is what the programs' --help says (node scripts/flag-reference.ts rewrites it)", () => {
    const reference = read('docs/flags.md');
    const missing = all.flatMap((c) =>
      c.flags
        .filter((f) => !reference.includes(`\`--${f.name}\``))
        .map((f) => `${c.program} ${c.command ?? ''} --${f.name}`),
    );
    expect(missing).toEqual([]);
    expect(reference).toBe(flagReference(all));
  });

  it("every --flag after a program's name in README.md and docs/*.md is a flag of that program", () => {
    const names = programs().map((p) => p.name);
    const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md') && f !== 'flags.md');
    const problems: string[] = [];
    for (const file of ['README.md', ...docs.map((f) => `docs/${f}`)]) {
      for (const { line, number } of logicalLines(read(file))) {
        for (const { program, flag } of flagsAfterPrograms(line, names)) {
          if (unknownTo(acceptedFlags(all, program), flag))
            problems.push(`${file}:${number}: ${program} has no --${flag}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('the scan finds a misspelt flag on a continued command line', () => {
    const [command] = logicalLines('etcd-gc --store file:///s \\\n  --keep-dayly 7 --no-dry-run');
    const unknown = flagsAfterPrograms(command.line, ['etcd-gc']).filter(({ program, flag }) =>
      unknownTo(acceptedFlags(all, program), flag),
    );
    expect(unknown).toEqual([{ program: 'etcd-gc', flag: 'keep-dayly' }]);
  });
});
