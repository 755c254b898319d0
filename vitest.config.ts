import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string, file = 'index.ts') =>
  fileURLToPath(new URL(`./packages/${pkg}/src/${file}`, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run against the TypeScript sources; end-to-end tests run the built programs.
    alias: [
      { find: /^@etcd-steward\/testing$/, replacement: src('testing') },
      { find: /^@etcd-steward\/core$/, replacement: src('core') },
      { find: /^@etcd-steward\/core\/([a-z]+)$/, replacement: src('core', '$1/index.ts') },
      { find: /^@etcd-steward\/snapshot$/, replacement: src('snapshot') },
      { find: /^@etcd-steward\/gc$/, replacement: src('gc') },
      { find: /^@etcd-steward\/restore$/, replacement: src('restore') },
      { find: /^@etcd-steward\/validate$/, replacement: src('validate') },
      { find: /^@etcd-steward\/compact$/, replacement: src('compact') },
      { find: /^@etcd-steward\/copy-backups$/, replacement: src('copy-backups') },
      { find: /^@etcd-steward\/etcdbrctl$/, replacement: src('etcdbrctl') },
    ],
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
