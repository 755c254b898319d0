// Writes docs/flags.md, every program's flags as its --help gives them (and so as yargs defines them):
//   node scripts/flag-reference.ts          rewrite docs/flags.md
//   node scripts/flag-reference.ts --check  exit 1 when docs/flags.md is not what the programs say (test/flags.test.ts)
// Run it after changing a flag; the programs must be built (pnpm exec tsc -b).
import { readFileSync, writeFileSync } from 'node:fs';
import { type CommandFlags, type Flag, programFlags } from './program-flags.ts';

const target = new URL('../docs/flags.md', import.meta.url);
/** What programArgs gives every program: listed once, at the top. */
export const SHARED = ['config', 'output', 'log-level', 'help', 'version'];

const cell = (text: string) => text.replaceAll('|', '\\|');
const names = (f: Flag) => [`--${f.name}`, ...f.aliases].map((n) => `\`${n}\``).join(', ');
// `[number] [default: 10]` as `number, default 10`.
const kind = (f: Flag) => f.annotations.map((a) => a.slice(1, -1).replace(/^(default|choices): /, '$1 ')).join(', ');
const cells = (f: Flag) => [names(f), cell(kind(f)), cell(f.describe)];
/** A Markdown table with its columns padded, as the formatter (biome) leaves it. */
function table(flags: Flag[]): string {
  const rows = [['flag', 'kind', 'meaning'], ...flags.map(cells)];
  const widths = rows[0].map((_, i) => Math.max(3, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(rows[0]), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)].join('\n');
}

export function flagReference(all: CommandFlags[]): string {
  const shared = all[0].flags.filter((f) => SHARED.includes(f.name));
  const parts = [
    '# Flag reference',
    '',
    "Generated from the programs' `--help` by `node scripts/flag-reference.ts`; do not edit by hand",
    '(`test/flags.test.ts` fails when this file and the programs disagree). Each flag can also be set as',
    '`ETCD_STEWARD_<FLAG>` or in a `--config` file ([user.md](user.md)). Defaults shown as `/tmp` are the',
    "system's temporary directory.",
    '',
    '## Every program',
    '',
    'Each program and command also takes `completion` (prints a bash/zsh completion script).',
    '',
    table(shared),
  ];
  for (const c of all) {
    // A program with commands: its flags are those of its commands (a named default one's among them), unless it
    // has flags no command lists (an unnamed default command's, as etcd-restore's beside its log and get).
    const commands = all.filter((o) => o.program === c.program && o.command !== undefined);
    const ownFlags = c.flags.some(
      (f) => !SHARED.includes(f.name) && !commands.some((o) => o.flags.some((g) => g.name === f.name)),
    );
    if (c.command === undefined && commands.length > 0 && !ownFlags) continue;
    const own = c.flags.filter((f) => !SHARED.includes(f.name));
    parts.push('', `## ${c.program}${c.command ? ` ${c.command}` : ''}`, '');
    if (c.summary) parts.push(c.summary, '');
    parts.push(table(own));
  }
  return `${parts.join('\n')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const text = flagReference(programFlags());
  if (process.argv.includes('--check')) {
    const current = readFileSync(target, 'utf8');
    if (current !== text) {
      console.error('docs/flags.md is out of date: run node scripts/flag-reference.ts');
      process.exit(1);
    }
  } else {
    writeFileSync(target, text);
    console.log('wrote docs/flags.md');
  }
}
