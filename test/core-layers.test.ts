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
  'inspection',
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

/** The import cycles among `files`, each as a path of files relative to `root`. */
function cycles(files: string[], root: string): string[] {
  const graph = new Map(files.map((f) => [f, imports(f)]));
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'open') {
      found.push([...path.slice(path.indexOf(file)), file].map((f) => relative(root, f)).join(' → '));
      return;
    }
    state.set(file, 'open');
    for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    state.set(file, 'done');
  };
  for (const file of files) visit(file, []);
  return found;
}

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
    expect(cycles(files, SRC)).toEqual([]);
  });
});

/**
 * The sidecar's component folders (packages/snapshot/src/run/, docs/developer.md), each allowed to use run/'s shared
 * files and the folders before it; the shared files use none but the leadership, and only the assembly (sidecar.ts,
 * sidecar-config.ts, parts.ts) knows every part.
 */
const COMPONENTS = [
  'leadership',
  'snapshotting',
  'maintenance',
  'garbage-collection',
  'proof-record',
  'store-protection',
  'kubernetes',
  'initialization',
  'api',
];
const ASSEMBLY = ['sidecar.ts', 'sidecar-config.ts', 'parts.ts'];
const SNAPSHOT = fileURLToPath(new URL('../packages/snapshot/src', import.meta.url));
const RUN = join(SNAPSHOT, 'run');

describe("the sidecar's layout", () => {
  const files = sourceFiles(SNAPSHOT);
  const componentOf = (file: string) => {
    const path = relative(RUN, file);
    return path.startsWith('..') ? undefined : path.includes('/') ? path.split('/')[0] : '';
  };

  it('has run/ made of the component folders and the shared files', () => {
    const folders = new Set(files.map(componentOf).filter((c) => c));
    expect([...folders].sort()).toEqual([...COMPONENTS].sort());
  });

  it('imports run one way: a component uses the shared files and the components before it, never one after', () => {
    const wrong: string[] = [];
    for (const file of files) {
      const from = componentOf(file);
      if (from === undefined || ASSEMBLY.includes(relative(RUN, file))) continue;
      for (const target of imports(file)) {
        const to = componentOf(target);
        if (to === undefined || to === from) {
          if (to === undefined && from !== undefined)
            wrong.push(`${relative(SNAPSHOT, file)} imports ${relative(SNAPSHOT, target)}`);
          continue;
        }
        const allowed =
          to === ''
            ? !ASSEMBLY.includes(relative(RUN, target))
            : from === ''
              ? to === 'leadership'
              : COMPONENTS.indexOf(to) < COMPONENTS.indexOf(from);
        if (!allowed) wrong.push(`${relative(SNAPSHOT, file)} imports ${relative(SNAPSHOT, target)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('no file imports itself through a cycle', () => {
    expect(cycles(files, SNAPSHOT)).toEqual([]);
  });
});

describe("every package's size", () => {
  it('no source file over 350 lines without a reason at its top, no folder over 20 files', () => {
    const root = fileURLToPath(new URL('../packages', import.meta.url));
    const all = readdirSync(root).flatMap((pkg) => {
      try {
        return sourceFiles(join(root, pkg, 'src'));
      } catch {
        return [];
      }
    });
    const long = all.filter((file) => {
      const text = readFileSync(file, 'utf8');
      return text.split('\n').length > 350 && !/^\/\/ Over 350 lines: /m.test(text.split('\n').slice(0, 5).join('\n'));
    });
    expect(long.map((f) => relative(root, f))).toEqual([]);
    const perFolder = new Map<string, number>();
    for (const file of all) perFolder.set(dirname(file), (perFolder.get(dirname(file)) ?? 0) + 1);
    expect([...perFolder].filter(([, n]) => n > 20).map(([dir, n]) => `${relative(root, dir)}: ${n}`)).toEqual([]);
  });
});
