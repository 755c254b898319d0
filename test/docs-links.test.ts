import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { referenceProblems } from './doc-references.js';
import { tempDir } from './temp-dir.js';

const repo = fileURLToPath(new URL('..', import.meta.url));

describe('documents the repository points to', () => {
  it('are all in the repository: cited docs and sections, paths in comments, relative links', () => {
    expect(referenceProblems(repo)).toEqual([]);
  });

  const path = tempDir('docs-links-');
  const write = (name: string, text: string) => {
    mkdirSync(dirname(path('repo', name)), { recursive: true });
    writeFileSync(path('repo', name), text);
  };

  it('are reported one by one when missing: documents kept elsewhere, unknown sections, broken links', () => {
    write('README.md', '# Tool\n\n[guide](docs/guide.md), [gone](docs/gone.md), [site](https://example.com/x.md)\n');
    write(
      'docs/guide.md',
      '# Guide\n\n## 1. One\n\nSee §1 and §2, [one](#1-one), [two](#two), [up](../../outside.md).\n',
    );
    write(
      'src/code.ts',
      [
        '// The format: FORMATS.md §2; the layout: docs/guide.md §1, docs/guide.md §3.',
        "const name = 'NOT-A-COMMENT.md';",
        '/* Bytes as ../elsewhere/PLAN.md says; more at https://example.com/docs/REMOTE.md. */',
        'export const n = name.length; // §1 alone',
        '',
      ].join('\n'),
    );
    write('scripts/run', '#!/usr/bin/env bash\n# flags: SETUP-NOTES.md, /opt/notes/NOTES.md\necho "#not.md"\n');
    expect(referenceProblems(path('repo'))).toEqual([
      'README.md:3: link to docs/gone.md: no such file in the repository',
      'docs/guide.md:5: docs/guide.md has no section 2',
      'docs/guide.md:5: link to #two: docs/guide.md has no heading for #two',
      'docs/guide.md:5: link to ../../outside.md: no such file in the repository',
      'scripts/run:2: SETUP-NOTES.md is not in the repository: cite a doc under docs/',
      'scripts/run:2: /opt/notes/NOTES.md is outside the repository: cite the doc under docs/',
      'src/code.ts:1: FORMATS.md is not in the repository: cite a doc under docs/',
      'src/code.ts:1: docs/guide.md has no section 3',
      'src/code.ts:3: ../elsewhere/PLAN.md is not in the repository: cite a doc under docs/',
      'src/code.ts:4: §1 names no document: say which, e.g. docs/etcd-formats.md §1',
    ]);
  });
});
