// Writes the generated part of docs/moving-from-ebr.md (every ebr flag and variable and what it does here) from
// etcdbrctl's table:
//   node scripts/ebr-reference.ts          rewrite it
//   node scripts/ebr-reference.ts --check  exit 1 when the page is not what the table says (test/etcdbrctl-docs.test.ts)
// Run it after changing packages/etcdbrctl/src/ebr-flags.ts or ebr-environment.ts; etcdbrctl must be built.
import { readFileSync, writeFileSync } from 'node:fs';
import { withEbrReference } from '@etcd-steward/etcdbrctl';

const target = new URL('../docs/moving-from-ebr.md', import.meta.url);
const page = readFileSync(target, 'utf8');
const wanted = withEbrReference(page);
if (process.argv.includes('--check')) {
  if (wanted !== page) {
    console.error('docs/moving-from-ebr.md is stale: run node scripts/ebr-reference.ts');
    process.exit(1);
  }
} else {
  writeFileSync(target, wanted);
}
