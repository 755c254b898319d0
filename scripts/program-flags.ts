// The flags each program takes, read from its live `--help` (which yargs writes from the option definitions),
// so that the flag reference, the docs check and the manifests check all follow the programs as they change.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Flag {
  /** The long name, without dashes. */
  name: string;
  /** Other spellings yargs accepts: `-m`, `--max-parallel-copy-operations`. */
  aliases: string[];
  describe: string;
  /** What yargs shows after the description: `[number] [default: 10]`, `[choices: "a", "b"]`. */
  annotations: string[];
}

export interface CommandFlags {
  program: string;
  /** Undefined for a program's own options (a program without subcommands, or those all its commands share). */
  command?: string;
  summary: string;
  flags: Flag[];
}

const root = new URL('..', import.meta.url).pathname;

/** Every program of the workspace (each package's `bin`) and the script it runs. */
export function programs(): { name: string; bin: string }[] {
  const found: { name: string; bin: string }[] = [];
  for (const dir of readdirSync(join(root, 'packages')).sort()) {
    let manifest: { bin?: Record<string, string> };
    try {
      manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'));
    } catch {
      continue;
    }
    // etcdbrctl speaks ebr's command line, not ours: its flags are in docs/moving-from-ebr.md, from its own table.
    if (dir === 'etcdbrctl') continue;
    for (const [name, bin] of Object.entries(manifest.bin ?? {}))
      found.push({ name, bin: join(root, 'packages', dir, bin) });
  }
  return found.sort((a, b) => a.name.localeCompare(b.name));
}

function help(bin: string, args: string[]): string {
  // No terminal: yargs wraps at 100 columns, the width the parser below reads.
  // TMPDIR fixed: defaults that are the temp dir read the same on every machine.
  return execFileSync(process.execPath, [bin, ...args, '--help'], {
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', TMPDIR: '/tmp' },
  });
}

/** A `--help` text's option entries and commands. */
export function parseHelp(text: string, program: string): { flags: Flag[]; commands: string[]; summary: string } {
  const lines = text.split('\n');
  const flags: Flag[] = [];
  const commands: string[] = [];
  let section = '';
  let entry: { names: string[]; text: string[] } | undefined;
  const finish = () => {
    if (!entry) return;
    const joined = entry.text.join(' ').replace(/\s+/g, ' ').trim();
    const tail = /((?:\s*\[[^[\]]*\])+)\s*$/.exec(joined);
    const annotations = tail ? (tail[1].match(/\[[^[\]]*\]/g) ?? []) : [];
    const describe = tail ? joined.slice(0, tail.index).trim() : joined;
    const long = entry.names.filter((n) => n.startsWith('--'));
    const name = long[0].slice(2);
    flags.push({ name, aliases: entry.names.filter((n) => n !== `--${name}`), describe, annotations });
    entry = undefined;
  };
  // The first paragraph after the usage line(s) says what the program or command does.
  const paragraphs = text.split(/\n\s*\n/);
  const summary = (paragraphs.find((p, i) => i > 0 && !/^\S+:$/m.test(p.split('\n')[0])) ?? '')
    .replace(/\s+/g, ' ')
    .trim();
  for (const line of lines) {
    if (/^\S.*:$/.test(line)) {
      finish();
      section = line;
      continue;
    }
    if (line.trim() === '') {
      finish();
      continue;
    }
    if (section === 'Examples:') continue; // a wrapped example can start with a flag
    if (section === 'Commands:') {
      const command = new RegExp(`^  ${program} ([\\w-]+)`).exec(line);
      if (command && command[1] !== 'completion') commands.push(command[1]);
      continue;
    }
    const option = /^ {2}((?:-{1,2}[\w-]+)(?:, -{1,2}[\w-]+)*)(?: {2,}(.*))?$/.exec(line);
    if (option) {
      finish();
      entry = { names: option[1].split(', '), text: [option[2] ?? ''] };
      continue;
    }
    const padded = /^ {6}(--[\w-]+(?:, --[\w-]+)*)(?: {2,}(.*))?$/.exec(line);
    if (padded) {
      finish();
      entry = { names: padded[1].split(', '), text: [padded[2] ?? ''] };
      continue;
    }
    if (entry) entry.text.push(line.trim());
  }
  finish();
  return { flags, commands, summary };
}

/** Every program's flags, command by command, from their `--help`. */
export function programFlags(): CommandFlags[] {
  const all: CommandFlags[] = [];
  for (const { name, bin } of programs()) {
    const top = parseHelp(help(bin, []), name);
    all.push({ program: name, summary: top.summary, flags: top.flags });
    for (const command of top.commands) {
      const sub = parseHelp(help(bin, [command]), name);
      all.push({ program: name, command, summary: sub.summary, flags: sub.flags });
    }
  }
  return all;
}

/** Every spelling a program accepts, any command: `store`, `m`, `max-parallel-copy-operations`. */
export function acceptedFlags(all: CommandFlags[], program: string, command?: string): Set<string> {
  const names = new Set<string>();
  for (const c of all) {
    if (c.program !== program || (command !== undefined && c.command !== undefined && c.command !== command)) continue;
    for (const f of c.flags) {
      names.add(f.name);
      for (const a of f.aliases) names.add(a.replace(/^-+/, ''));
    }
  }
  return names;
}
