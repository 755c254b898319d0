/**
 * A real OpenStack Swift on 127.0.0.1 (Debian's swift, swift-proxy, swift-object, swift-container and swift-account,
 * which scripts/setup installs): one replica on a folder of the caller's, tempauth (auth v1) in front, with a
 * memcached of its own that tempauth keeps its tokens in. docs/developer.md lists the traps this works around:
 * - the rings are built in one Python process (swift-ring-builder run nine times costs seconds);
 * - every config names the folder as swift_dir and the running user as user (else the servers switch to `swift`);
 * - `/usr/bin/python3`, not a python3 that comes earlier on PATH;
 * - there is no /dev/log: the servers run with -v and their output goes to files in the folder;
 * - the servers make themselves session leaders, so each is stopped by its own pid, never by a group.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort } from '@etcd-steward/core';
import type { TestServer } from './test-server.ts';

const run = promisify(execFile);
const SERVERS = ['account', 'container', 'object', 'proxy'] as const;

export interface SwiftServer extends TestServer {
  /** The proxy's auth v1 URL: `<endpoint>/auth/v1.0`. */
  authUrl: string;
  /** A tempauth user of account AUTH_test, with the reseller admin's rights in it: `test:tester`. */
  user: string;
  password: string;
  /** Authenticates as `user` (auth v1): the account's storage URL and a token for it. */
  token(): Promise<{ storageUrl: string; token: string }>;
  /** Creates a container in the account. */
  createContainer(name: string): Promise<void>;
  /** Every object of a container, paged, as Swift lists them: name, bytes, hash. */
  listAll(container: string, prefix?: string): Promise<{ name: string; bytes: number; hash: string }[]>;
  /** The folder with the configs, the device and the servers' logs. */
  dir: string;
}

export async function startSwift(dir: string): Promise<SwiftServer> {
  await mkdir(join(dir, 'devices', 'd1'), { recursive: true });
  const [memcachePort, proxyPort, accountPort, containerPort, objectPort] = await Promise.all(
    Array.from({ length: 5 }, () => freePort()),
  );
  const user = userInfo().username;
  await writeConfigs(dir, { user, proxyPort, accountPort, containerPort, objectPort, memcachePort });
  await buildRings(dir, { account: accountPort, container: containerPort, object: objectPort });

  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map((child) => stopChild(child)));
  };
  try {
    const memcachedLog = openSync(join(dir, 'memcached.log'), 'a');
    children.push(
      spawn('memcached', ['-u', user, '-l', '127.0.0.1', '-p', String(memcachePort), '-U', '0', '-m', '16'], {
        stdio: ['ignore', memcachedLog, memcachedLog],
      }),
    );
    for (const server of SERVERS) {
      const log = openSync(join(dir, `${server}.log`), 'a');
      children.push(
        spawn(`/usr/bin/swift-${server}-server`, [join(dir, `${server}-server.conf`), '-v'], {
          stdio: ['ignore', log, log],
          env: { ...process.env, PATH: `/usr/bin:/bin:${process.env.PATH ?? ''}` },
        }),
      );
    }
    const endpoint = `http://127.0.0.1:${proxyPort}`;
    const authUrl = `${endpoint}/auth/v1.0`;
    const swift: SwiftServer = {
      endpoint,
      authUrl,
      user: 'test:tester',
      password: 'testing',
      dir,
      stop,
      token: () => authenticate(authUrl, 'test:tester', 'testing'),
      createContainer: async (name) => {
        const { storageUrl, token } = await swift.token();
        const res = await fetch(`${storageUrl}/${encodeURIComponent(name)}`, {
          method: 'PUT',
          headers: { 'x-auth-token': token },
        });
        if (!res.ok) throw new Error(`Swift: create container ${name}: ${res.status} ${await res.text()}`);
      },
      listAll: async (container, prefix = '') => {
        const { storageUrl, token } = await swift.token();
        const out: { name: string; bytes: number; hash: string }[] = [];
        let marker = '';
        for (;;) {
          const query = new URLSearchParams({ format: 'json', prefix, marker });
          const res = await fetch(`${storageUrl}/${encodeURIComponent(container)}?${query}`, {
            headers: { 'x-auth-token': token },
          });
          if (res.status === 404) return out;
          const page = (await res.json()) as { name: string; bytes: number; hash: string }[];
          if (page.length === 0) return out;
          out.push(...page);
          marker = page[page.length - 1].name;
        }
      },
    };
    await waitUntilReady(swift, children);
    return swift;
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${await logTails(dir)}`);
  }
}

/** The end of each server's log, for a start-up that failed (the caller may remove the folder). */
async function logTails(dir: string): Promise<string> {
  const tails = await Promise.all(
    ['memcached', ...SERVERS].map(async (name) => {
      const text = await readFile(join(dir, `${name}.log`), 'utf8').catch(() => '');
      return `--- ${name}.log\n${text.split('\n').slice(-8).join('\n')}`;
    }),
  );
  return tails.join('\n');
}

async function authenticate(authUrl: string, user: string, key: string) {
  const res = await fetch(authUrl, { headers: { 'x-auth-user': user, 'x-auth-key': key } });
  const storageUrl = res.headers.get('x-storage-url');
  const token = res.headers.get('x-auth-token');
  if (!res.ok || !storageUrl || !token) throw new Error(`Swift auth: ${res.status}`);
  return { storageUrl, token };
}

/** Ready when a container can be made and listed: the proxy, tempauth's memcached and all three rings answer. */
async function waitUntilReady(swift: SwiftServer, children: ChildProcess[]): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const exited = children.find((c) => c.exitCode !== null);
    if (exited)
      throw new Error(`a Swift server exited with ${exited.exitCode} (${exited.spawnargs[0]}): see ${swift.dir}`);
    try {
      await swift.createContainer('ready-check');
      if ((await swift.listAll('ready-check')).length === 0) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`Swift did not get ready in 120 s`);
    await sleep(200);
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

interface Ports {
  user: string;
  proxyPort: number;
  accountPort: number;
  containerPort: number;
  objectPort: number;
  memcachePort: number;
}

async function writeConfigs(dir: string, p: Ports): Promise<void> {
  const common = (port: number) =>
    [
      '[DEFAULT]',
      `swift_dir = ${dir}`,
      `devices = ${join(dir, 'devices')}`,
      'mount_check = false',
      'disable_fallocate = true',
      'bind_ip = 127.0.0.1',
      `bind_port = ${port}`,
      'workers = 0',
      `user = ${p.user}`,
      'log_level = INFO',
      '',
    ].join('\n');
  const backend = (kind: string, port: number) =>
    `${common(port)}[pipeline:main]\npipeline = ${kind}-server\n\n[app:${kind}-server]\nuse = egg:swift#${kind}\n\n` +
    `[${kind}-replicator]\n\n[${kind}-auditor]\n${kind === 'account' ? '' : `\n[${kind}-updater]\n`}`;
  await writeFile(
    join(dir, 'swift.conf'),
    '[swift-hash]\nswift_hash_path_suffix = etcd-steward-tests\nswift_hash_path_prefix = etcd-steward\n\n' +
      '[storage-policy:0]\nname = one-replica\ndefault = yes\n\n[swift-constraints]\n',
  );
  await writeFile(join(dir, 'account-server.conf'), backend('account', p.accountPort));
  await writeFile(join(dir, 'container-server.conf'), backend('container', p.containerPort));
  await writeFile(join(dir, 'object-server.conf'), backend('object', p.objectPort));
  await writeFile(
    join(dir, 'proxy-server.conf'),
    `${common(p.proxyPort)}[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
token_life = 86400

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:${p.memcachePort}

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:bulk]
use = egg:swift#bulk

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
`,
  );
}

/** The three rings, one device each, one replica, built in one Python process (a second instead of six). */
async function buildRings(dir: string, ports: Record<'account' | 'container' | 'object', number>): Promise<void> {
  const script = `
import sys
from swift.common.ring import RingBuilder
d = sys.argv[1]
for kind, port in (('account', int(sys.argv[2])), ('container', int(sys.argv[3])), ('object', int(sys.argv[4]))):
    b = RingBuilder(6, 1, 1)
    b.add_dev({'id': 0, 'region': 1, 'zone': 1, 'ip': '127.0.0.1', 'port': port, 'device': 'd1', 'weight': 100, 'meta': ''})
    b.rebalance()
    b.save('%s/%s.builder' % (d, kind))
    b.get_ring().save('%s/%s.ring.gz' % (d, kind))
`;
  await run('/usr/bin/python3', [
    '-c',
    script,
    dir,
    String(ports.account),
    String(ports.container),
    String(ports.object),
  ]);
}
