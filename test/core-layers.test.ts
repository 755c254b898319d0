import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** core's folders, each allowed to use only those before it (docs/developer.md, Layout). */
const LAYERS = [
  'common',
  'bbolt',
  'wal',
  'format',
  'store',
  'etcd',
  'kubernetes',
  'backup',
  'retention',
  'copy',
  'replay',
  'validation',
  'proof',
  'restore',
  'bootstrap',
  'compaction',
  'maintenance',
  'cli',
];
const SRC = fileURLToPath(new URL('../packages/core/src', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}

/** The core files a file imports (static and dynamic imports alike; type-only imports count too). */
function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)].map((m) =>
    resolve(dirname(file), `${m[1]}.ts`),
  );
}

const layerOf = (file: string) => relative(SRC, file).split('/')[0];

describe("core's layout", () => {
  const files = sourceFiles(SRC);

  it('has every file in a documented folder, but the entry points', () => {
    const loose = files.map((f) => relative(SRC, f)).filter((f) => !f.includes('/'));
    expect(loose.sort()).toEqual(['index.ts']);
    expect([...new Set(files.map(layerOf).filter((l) => l.includes('/') || !l.endsWith('.ts')))].sort()).toEqual(
      [...LAYERS].sort(),
    );
  });

  it('imports run one way between folders: a folder uses only those before it', () => {
    const wrong: string[] = [];
    for (const file of files) {
      const from = LAYERS.indexOf(layerOf(file));
      if (from < 0) continue;
      for (const target of imports(file)) {
        const to = LAYERS.indexOf(layerOf(target));
        if (to > from) wrong.push(`${relative(SRC, file)} imports ${relative(SRC, target)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('no file imports itself through a cycle', () => {
    const graph = new Map(files.map((f) => [f, imports(f)]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]) => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...path.slice(path.indexOf(file)), file].map((f) => relative(SRC, f)).join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });
});
