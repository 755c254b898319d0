import { EBR_ENVIRONMENT } from './ebr-environment.js';
import { EBR_FLAGS, type EbrFlag } from './ebr-flags.js';

/** Where docs/moving-from-ebr.md's generated part starts and ends. */
export const GENERATED_START = '<!-- generated from packages/etcdbrctl/src by node scripts/ebr-reference.ts -->';
export const GENERATED_END = '<!-- end of the generated part -->';

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

function here(flag: EbrFlag): string {
  const effect = flag.effect;
  if ('refused' in effect) return `refused (exit 2): ${effect.refused}`;
  if ('noEffect' in effect) return `accepted, no effect: ${effect.noEffect}`;
  if ('special' in effect) return effect.special;
  return effect.here;
}

/** A Markdown table with its columns padded, as the formatter (biome) leaves it. */
function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(3, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(rows[0]), line(widths.map((w) => '-'.repeat(w))), ...rows.slice(1).map(line)];
}

/** The flag and variable tables of docs/moving-from-ebr.md, from the table etcdbrctl runs on. */
export function renderEbrReference(): string {
  const flags = [...EBR_FLAGS].sort((a, b) => a.name.localeCompare(b.name));
  const lines = [
    GENERATED_START,
    '',
    '### Flags',
    '',
    ...table([
      ['ebr flag', 'ebr commands', 'ebr default', 'in ebr', 'here'],
      ...flags.map((f) => {
        const name = `\`--${f.name}\`${f.short ? ` (\`-${f.short}\`)` : ''}${f.versions ? ` ${f.versions}` : ''}`;
        const dflt = `\`${f.ebrDefault}\`${f.changed ? ` (${f.changed})` : ''}`;
        return [cell(name), f.commands.join(', '), cell(dflt), cell(f.meaning), cell(here(f))];
      }),
    ]),
    '',
    '### Environment',
    '',
    ...table([
      ['variable', 'in ebr', 'here'],
      ...EBR_ENVIRONMENT.map((v) => [`\`${cell(v.name)}\``, cell(v.meaning), cell(v.here)]),
    ]),
    '',
    GENERATED_END,
  ];
  return `${lines.join('\n')}\n`;
}

/** The page with its generated part replaced by `renderEbrReference()`. */
export function withEbrReference(page: string): string {
  const start = page.indexOf(GENERATED_START);
  const end = page.indexOf(GENERATED_END);
  if (start < 0 || end < start)
    throw new Error('docs/moving-from-ebr.md has no generated part (its markers are missing)');
  return page.slice(0, start) + renderEbrReference() + page.slice(end + GENERATED_END.length + 1);
}
