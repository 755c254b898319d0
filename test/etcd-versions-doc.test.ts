import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(fileURLToPath(new URL(`../${path}`, import.meta.url)), 'utf8');

// Running setup inside the suite would reinstall and rebuild the tree the other tests run from (see
// install.test.ts), so the scripts are read: which of them unpacks etcd 3.5, and when.
describe('docs/etcd-versions.md on where etcd 3.5 comes from', () => {
  it('names the scripts that unpack it as they do: scripts/test always, scripts/setup only with ETCD_VERSION=3.5', () => {
    const calls = (script: string) =>
      read(script)
        .split('\n')
        .filter((line) => /^\s*provide_etcd_3_5\s*$/.test(line));
    expect(calls('scripts/test')).toEqual(['provide_etcd_3_5']);
    // in setup, only inside `case "${ETCD_VERSION:-3.4}"`'s 3.5 branch
    expect(calls('scripts/setup')).toEqual(['    provide_etcd_3_5']);
    expect(read('scripts/setup')).toMatch(
      /^case "\$\{ETCD_VERSION:-3\.4\}" in\n {2}3\.4\) ;;\n {2}3\.5\)\n {4}provide_etcd_3_5$/m,
    );
    const row = read('docs/etcd-versions.md')
      .split('\n')
      .find((line) => line.startsWith('| 3.5.'));
    expect(row).toMatch(/by `scripts\/test`, and by `scripts\/setup` or `scripts\/demo` with `ETCD_VERSION=3\.5`/);
    expect(row).toMatch(/plain `scripts\/setup` leaves it out/);
  });
});
