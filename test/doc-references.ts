import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, isAbsolute, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/*
 * The documents the repository's comments and docs point a reader to must be in the repository: a clone is
 * all a user has. Checked here: every `*.md` a source comment or doc names, every `§` section it cites,
 * every `../` path it gives, and every relative link in the Markdown files.
 */

/** Installed, built or machine-local folders: not the project's own text. */
const SKIP = new Set(['node_modules', 'dist', '.git', '.tools', 'coverage', '.bench']);

/** Text to check: a comment, or a whole Markdown file, with the line it starts on. */
interface Passage {
  file: string;
  line: number;
  text: string;
}

/** Every problem found under `root`, as `path:line: what is wrong`. */
export function referenceProblems(root: string): string[] {
  const problems: string[] = [];
  for (const file of projectFiles(root)) {
    const markdown = extname(file) === '.md';
    const passages = markdown ? [{ file, line: 1, text: readFileSync(file, 'utf8') }] : comments(file);
    for (const passage of passages) {
      const report = (index: number, problem: string) => {
        const line = passage.line + countLines(passage.text.slice(0, index));
        problems.push(`${relative(root, file)}:${line}: ${problem}`);
      };
      // A link's target is checked as a link, once.
      const prose = markdown
        ? passage.text.replace(LINK, (link) => link.replace(/\]\(.*\)$/s, (t) => ' '.repeat(t.length)))
        : passage.text;
      checkCitations(root, { ...passage, text: prose }, markdown, report);
      if (markdown) checkLinks(root, passage, report);
    }
  }
  return problems;
}

function* projectFiles(dir: string): Generator<string> {
  const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIP.has(entry.name)) yield* projectFiles(path);
    } else if (entry.isFile() && (['.ts', '.js', '.md'].includes(extname(entry.name)) || isShellScript(path))) {
      yield path;
    }
  }
}

function isShellScript(path: string): boolean {
  return extname(path) === '' && readFileSync(path).subarray(0, 2).toString('latin1') === '#!';
}

/** A source file's comments (TypeScript's own reading of it, so strings and URLs are not taken for comments). */
function comments(file: string): Passage[] {
  const text = readFileSync(file, 'utf8');
  if (isShellScript(file)) {
    return text.split('\n').flatMap((line, i) => {
      const at = line.search(/(^|\s)#/);
      return at < 0 ? [] : [{ file, line: i + 1, text: line.slice(at) }];
    });
  }
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const ranges = new Map<number, ts.CommentRange>();
  const collect = (node: ts.Node) => {
    for (const range of [
      ...(ts.getLeadingCommentRanges(text, node.pos) ?? []),
      ...(ts.getTrailingCommentRanges(text, node.end) ?? []),
    ]) {
      ranges.set(range.pos, range);
    }
    ts.forEachChild(node, collect);
  };
  collect(source);
  return [...ranges.values()].map((r) => ({
    file,
    line: source.getLineAndCharacterOfPosition(r.pos).line + 1,
    text: text.slice(r.pos, r.end),
  }));
}

type Report = (index: number, problem: string) => void;

/** A Markdown file's name, not part of a URL. */
const MD_NAME = /(?<![\w/.:-])(\/?(?:[\w.-]+\/)*[\w-][\w.-]*\.md)\b/g;
/** A section sign and a section number, or a range of them, with the document named just before, if any. */
const SECTION = /(?:([\w./-]+\.md)\b[^§\n]{0,60}?)?§\s*(\d+(?:\.\d+)*)(?:\s*[–-]\s*(\d+(?:\.\d+)*))?/g;
/** A relative path that climbs out of its folder (a Markdown file's name is checked as a citation). */
const CLIMB = /(?<![\w/.-])((?:\.\.\/)+[\w.-]+(?:\/[\w.-]+)*)(?<!\.md)(?![\w/.-])/g;
/** A Markdown link, `[text](target)`. */
const LINK = /\[[^\]]*\]\(([^)\s]+)\)/g;

function checkCitations(root: string, passage: Passage, markdown: boolean, report: Report): void {
  const dir = dirname(passage.file);
  for (const m of passage.text.matchAll(MD_NAME)) {
    if (isAbsolute(m[1])) report(m.index, `${m[1]} is outside the repository: cite the doc under docs/`);
    else if (!citedDocument(root, dir, m[1]))
      report(m.index, `${m[1]} is not in the repository: cite a doc under docs/`);
  }
  for (const m of passage.text.matchAll(CLIMB)) {
    const target = resolve(dir, m[1]);
    if (!inside(root, target) || !existsSync(target)) report(m.index, `${m[1]} is not a path in the repository`);
  }
  for (const m of passage.text.matchAll(SECTION)) {
    if (!m[1] && !markdown) {
      report(m.index, `§${m[2]} names no document: say which, e.g. docs/etcd-formats.md §${m[2]}`);
      continue;
    }
    // A section sign in a doc with no document named cites the doc itself.
    const doc = m[1] ? citedDocument(root, dir, m[1]) : passage.file;
    if (!doc) continue; // already reported as a missing document
    const sections = sectionNumbers(doc);
    for (const n of [m[2], m[3]]) {
      if (n !== undefined && !sections.has(n)) report(m.index, `${relative(root, doc)} has no section ${n}`);
    }
  }
}

function checkLinks(root: string, passage: Passage, report: Report): void {
  for (const m of passage.text.matchAll(LINK)) {
    const [path, anchor] = m[1].split('#', 2);
    if (/^[a-z][a-z0-9+.-]*:/i.test(m[1])) continue; // a URL
    const target = path === '' ? passage.file : resolve(dirname(passage.file), path);
    if (!inside(root, target) || !existsSync(target)) {
      report(m.index, `link to ${m[1]}: no such file in the repository`);
    } else if (anchor && extname(target) === '.md' && !headingSlugs(target).has(anchor)) {
      report(m.index, `link to ${m[1]}: ${relative(root, target)} has no heading for #${anchor}`);
    }
  }
}

/** The repository file a citation names: from the citing file's folder, the repository root, or docs/. */
function citedDocument(root: string, dir: string, name: string): string | undefined {
  return [resolve(dir, name), resolve(root, name), resolve(root, 'docs', name)].find(
    (path) => inside(root, path) && existsSync(path),
  );
}

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** Numbers of numbered headings (`## 2. bbolt`, `### 2.2 Meta pages`). */
function sectionNumbers(doc: string): Set<string> {
  const numbers = new Set<string>();
  for (const m of readFileSync(doc, 'utf8').matchAll(/^#{1,6}\s+(\d+(?:\.\d+)*)[.\s]/gm)) numbers.add(m[1]);
  return numbers;
}

/** Anchors of a Markdown file's headings, as GitHub makes them. */
function headingSlugs(doc: string): Set<string> {
  const slugs = new Set<string>();
  for (const m of readFileSync(doc, 'utf8').matchAll(/^#{1,6}\s+(.+)$/gm)) {
    slugs.add(
      m[1]
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return slugs;
}

function countLines(text: string): number {
  let n = 0;
  for (const c of text) if (c === '\n') n++;
  return n;
}
