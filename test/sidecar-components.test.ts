import { mkdir, readdir, readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@etcd-steward/core';
import { flagsOf, type SidecarPart } from '@etcd-steward/snapshot';
import { makeTestCertificates, startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer } from './servers/kube-apiserver.js';
import { startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/*
 * The sidecar's components as docs/developer.md describes them: a folder each under packages/snapshot/src/run/,
 * whose `*-part.ts` declares the flags, and whose components alone create the metrics and routes; each part
 * switched off takes its metrics and routes with it.
 */
const RUN = fileURLToPath(new URL('../packages/snapshot/src/run', import.meta.url));
const at = tempDir('sidecar-components-');

interface DeclaredPart {
  part: SidecarPart<never>;
  folder: string;
  flags: string[];
}

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    ),
  );
  return nested.flat();
}

/** The component folder a source file belongs to ('' for the sidecar's own files in run/). */
const folderOf = (file: string) => (relative(RUN, file).includes('/') ? relative(RUN, file).split('/')[0] : '');

/** Every literal a pattern finds in the sidecar's sources, with the folders it is written in. */
async function literals(pattern: RegExp): Promise<Map<string, Set<string>>> {
  const found = new Map<string, Set<string>>();
  for (const file of await sourceFiles(RUN)) {
    for (const m of (await readFile(file, 'utf8')).matchAll(pattern)) {
      found.set(m[1], (found.get(m[1]) ?? new Set()).add(folderOf(file)));
    }
  }
  return found;
}

const metricLiterals = () => literals(/'((?:etcd_snapshot|etcdbr)_[a-z0-9_]+)'/g);
const routeLiterals = () => literals(/path: '(\/[a-z/]+)'/g);

/** The parts, from their `*-part.ts` files (as built in dist), with the flags each declares. */
async function declaredParts(): Promise<DeclaredPart[]> {
  const parts: DeclaredPart[] = [];
  for (const file of (await sourceFiles(RUN)).filter((f) => f.endsWith('-part.ts'))) {
    const built = file.replace('/src/', '/dist/').replace(/\.ts$/, '.js');
    for (const exported of Object.values(await import(built))) {
      const part = exported as SidecarPart<never>;
      parts.push({ part, folder: folderOf(file), flags: flagsOf((y) => part.options(y)) });
    }
  }
  return parts;
}

describe("the sidecar's components, from their sources", () => {
  it('declares each flag in one part, and writes each metric name and route in one folder', async () => {
    const parts = await declaredParts();
    expect(parts.map((p) => p.part.name).sort()).toEqual([
      'alarms',
      'api',
      'corrupt-fence',
      'defragmentation',
      'garbage-collection',
      'initialization',
      'kubernetes',
      'proof-record',
      'snapshotting',
      'store-protection',
    ]);
    const owners = new Map<string, string[]>();
    for (const { part, flags } of parts) for (const f of flags) owners.set(f, [...(owners.get(f) ?? []), part.name]);
    expect([...owners].filter(([, names]) => names.length > 1)).toEqual([]);
    // A flag written as an option in the sidecar's sources is written in the folder of the part declaring it.
    const written = await literals(/\.option\(\s*'([a-z0-9-]+)'/g);
    for (const [flag, folders] of written) {
      const owner = parts.find((p) => p.flags.includes(flag));
      // The sidecar's own flags (store, --reelection-period, ...): in run/ itself or the leadership's folder.
      const expected = owner ? [owner.folder] : [...folders].filter((f) => f === '' || f === 'leadership');
      expect({ flag, folders: [...folders] }).toEqual({ flag, folders: expected.length === 1 ? expected : ['?'] });
    }
    for (const [name, folders] of [...(await metricLiterals()), ...(await routeLiterals())]) {
      expect({ name, folders: folders.size }).toEqual({ name, folders: 1 });
      expect(folders.has('')).toBe(false);
    }
  });

  it("groups each part's flags under its heading in --help", async () => {
    const bin = fileURLToPath(new URL('../packages/snapshot/bin/etcd-snapshot.js', import.meta.url));
    const { execFileSync } = await import('node:child_process');
    const help = execFileSync(process.execPath, [bin, 'run', '--help'], { encoding: 'utf8' });
    for (const { part, flags } of await declaredParts()) {
      const section = help.split(`\n${part.heading}:\n`)[1]?.split(/\n\n\S/)[0] ?? '';
      for (const flag of flags)
        expect({ part: part.name, flag, listed: section.includes(`--${flag} `) }).toMatchObject({ listed: true });
    }
  });
});

describe("the sidecar's components, switched on and off", () => {
  let cluster: TestCluster;
  let kubeconfig: string;
  let stopKube: () => Promise<void>;

  beforeAll(async () => {
    cluster = await startCluster();
    await mkdir(at('certificates'), { recursive: true });
    const kube = await startKubeApiServer(await makeTestCertificates(at('certificates')));
    stopKube = () => kube.stop();
    kubeconfig = at('kubeconfig');
    await kube.writeKubeconfig(kubeconfig);
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
    await stopKube?.();
  });

  /** The flags that switch every part on (the Kubernetes ones need the test API server), flag by flag. */
  const ALL_ON = (): string[][] => [
    ['--garbage-collection-period', '1h'],
    ['--enable-member-lease-renewal'],
    ['--etcd-member-resource'],
    ['--kubeconfig', kubeconfig],
  ];
  /** How each part is switched off. */
  const OFF: Record<string, string[]> = {
    snapshotting: ['--no-snapshotter'],
    defragmentation: ['--no-defragmentation'],
    alarms: ['--alarm-check-period', '0'],
    'corrupt-fence': ['--no-corrupt-fence'],
    'garbage-collection': ['--garbage-collection-period', '0'],
    'proof-record': ['--proof-record-period', '0'],
    'store-protection': ['--store-protection-period', '0'],
    kubernetes: ['--no-enable-member-lease-renewal', '--no-etcd-member-resource'],
    initialization: ['--no-initialization'],
  };

  /** What a sidecar with these flags serves: its own metric names, and which of the routes answer (not 404). */
  async function served(name: string, args: string[]) {
    const sidecar = await startSidecar({
      endpoint: cluster.endpoints[0],
      store: `file://${at('store')}`,
      dir: at(name),
      // The switches in `args` replace those of ALL_ON.
      args: [
        ...ALL_ON()
          .filter(([flag]) => !args.some((a) => a.replace('--no-', '--') === flag))
          .flat(),
        ...args,
      ],
      env: { ...process.env, POD_NAME: 'etcd-main-0', POD_NAMESPACE: 'shoot--dev' },
    });
    try {
      await waitFor('its components started', async () => (await sidecar.log()).includes('component started'));
      const text = await (await fetch(`${sidecar.url}/metrics`)).text();
      const metrics = new Set([...text.matchAll(/^# TYPE ((?:etcd_snapshot|etcdbr)_[a-z0-9_]+) /gm)].map((m) => m[1]));
      const routes = new Set<string>();
      for (const route of (await routeLiterals()).keys()) {
        if ((await fetch(`${sidecar.url}${route}`, { method: 'HEAD' })).status !== 404) routes.add(route);
      }
      return { metrics, routes };
    } finally {
      await sidecar.stop();
    }
  }

  it('with every part on, serves every metric and route the sources name', async () => {
    const all = await served('all', []);
    expect([...all.metrics].sort()).toEqual([...(await metricLiterals()).keys()].sort());
    expect([...all.routes].sort()).toEqual([...(await routeLiterals()).keys()].sort());
  }, 60_000);

  it("switching a part off removes exactly its folder's metrics and routes that no other part there makes", async () => {
    const all = await served('all-again', []);
    const parts = await declaredParts();
    const metricFolders = await metricLiterals();
    const routeFolders = await routeLiterals();
    const inFolder = (names: Map<string, Set<string>>, folder: string) =>
      [...names].filter(([, folders]) => folders.has(folder)).map(([n]) => n);
    for (const [name, off] of Object.entries(OFF)) {
      const { folder } = parts.find((p) => p.part.name === name) as DeclaredPart;
      const without = await served(`without-${name}`, off);
      const goneMetrics = [...all.metrics].filter((m) => !without.metrics.has(m));
      const goneRoutes = [...all.routes].filter((r) => !without.routes.has(r));
      // Nothing outside the part's folder goes with it, and nothing new appears.
      expect({ name, outside: goneMetrics.filter((m) => !inFolder(metricFolders, folder).includes(m)) }).toEqual({
        name,
        outside: [],
      });
      expect({ name, outside: goneRoutes.filter((r) => !inFolder(routeFolders, folder).includes(r)) }).toEqual({
        name,
        outside: [],
      });
      expect([...without.metrics].filter((m) => !all.metrics.has(m))).toEqual([]);
      // A part alone in its folder takes all of the folder's metrics and routes.
      if (parts.filter((p) => p.folder === folder).length === 1) {
        expect({ name, gone: [...goneMetrics, ...goneRoutes].sort() }).toEqual({
          name,
          gone: [...inFolder(metricFolders, folder), ...inFolder(routeFolders, folder)].sort(),
        });
      }
    }
    // The maintenance folder's parts, each with metrics of its own.
    const alarmsOff = await served('without-both', [...OFF.alarms, ...OFF.defragmentation]);
    expect([...alarmsOff.metrics].filter((m) => inFolder(metricFolders, 'maintenance').includes(m))).toEqual([]);
  }, 240_000);

  it('with the API off, nothing listens on the port and the snapshots are still taken', async () => {
    const port = await freePort();
    const { spawn } = await import('node:child_process');
    const bin = fileURLToPath(new URL('../packages/snapshot/bin/etcd-snapshot.js', import.meta.url));
    const dir = at('no-server');
    await mkdir(dir, { recursive: true });
    const child = spawn(
      process.execPath,
      [
        bin,
        'run',
        '--endpoints',
        cluster.endpoints[0],
        '--store',
        `file://${at('store-no-server')}`,
        '--spool-dir',
        join(dir, 'spool'),
        '--no-server',
        '--server-port',
        String(port),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let log = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk;
    });
    try {
      await waitFor('the start-up full snapshot', async () => log.includes('taking snapshots'));
      const refused = await new Promise<boolean>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          resolve(false);
        });
        socket.once('error', () => resolve(true));
      });
      expect(refused).toBe(true);
      expect(log).not.toMatch(/serving HTTP/);
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }, 60_000);
});
