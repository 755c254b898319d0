import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { chmod, chown, cp, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type CatalogEntry,
  freePort,
  listSnapshots,
  memberHolderIdentity,
  memberStatus,
  openStore,
} from '@etcd-steward/core';
import { makeTestCertificates, readRestored, startCluster, writeWorkload } from '@etcd-steward/testing';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ebrStoreDir } from './fixtures.js';
import { runProgram } from './run-program.js';
import { type KubeObject, startKubeApiServer } from './servers/kube-apiserver.js';
import { startS3Server } from './servers/s3-server.js';
import { etcdRevision, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

// One etcd version: druid's command lines and the Leases they ask for; the sidecar under them is tested on 3.5 elsewhere.

const ETCDBRCTL = fileURLToPath(new URL('../packages/etcdbrctl/bin/etcdbrctl.js', import.meta.url));
const at = tempDir('etcdbrctl-');
const NAMESPACE = 'test-ns';
/** The user etcd-druid runs the backup-restore container as. */
const POD_USER = 65532;
const asPodUser = process.getuid?.() === 0;
/** The member Lease druid reads for the pod etcd-test-0 of an Etcd whose member name prefix is `shoot`. */
const MEMBER_LEASE = 'shoot-etcd-test-0';

/** druid's argument list, the subcommand first, as in test/fixtures/druid/. */
async function druidArgs(file: string): Promise<string[]> {
  const text = await readFile(new URL(`./fixtures/druid/${file}`, import.meta.url), 'utf8');
  return text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
}

/** Hosts, ports and paths of the pod replaced by this machine's; every flag and every other value unchanged. */
function localised(args: string[], places: { root: string; endpoint: string; port: number }): string[] {
  return args.map((arg) =>
    arg
      .replace(/http:\/\/etcd-test-(local|client):2379/, places.endpoint)
      .replace(/^--server-port=8080$/, `--server-port=${places.port}`)
      .replace(/=\/(var\/etcd|home\/nonroot)\//, `=${places.root}/$1/`),
  );
}

/** A folder the pod's user owns, as the volumes druid mounts are. */
async function podDir(path: string): Promise<string> {
  await mkdir(path, { recursive: true });
  if (asPodUser) await chown(path, POD_USER, POD_USER);
  return path;
}

interface Started {
  child: ChildProcess;
  exited: Promise<number | null>;
  log: () => Promise<string>;
}

/** etcdbrctl as the container runs it: the pod's user (when the tests run as root), the pod's environment. */
function startEtcdbrctl(args: string[], env: NodeJS.ProcessEnv, logFile: string, pod = true): Started {
  const child = spawn(process.execPath, [ETCDBRCTL, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(pod && asPodUser ? { uid: POD_USER, gid: POD_USER } : {}),
  });
  const log = createWriteStream(logFile, { flags: 'a' });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, log: () => readFile(logFile, 'utf8') };
}

const spec = (lease: KubeObject | undefined) =>
  (lease?.spec ?? {}) as { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };

describe('etcdbrctl with the argument lists etcd-druid v0.37.1 renders', () => {
  it('sidecar: full and delta snapshots in gzip, the three Leases as druid reads them (idle too); compaction Job; copy Job', async () => {
    // The parts druid's pod reaches: etcd, an S3 bucket, the API server.
    const s3 = await startS3Server({ buckets: ['default.bkp', 'source-container', 'target-container'] });
    onTestFinished(() => s3.stop());
    const cluster = await startCluster();
    onTestFinished(() => cluster.stop());
    const certificates = await podDir(at('certificates'));
    const kube = await startKubeApiServer(await makeTestCertificates(certificates));
    onTestFinished(() => kube.stop());

    // The test's own temp folder must be passable for the pod's user, as a pod's file system is.
    if (asPodUser) await chmod(tmpdir(), 0o711);
    await chmod(at(), 0o755);
    const root = at('pod');
    await podDir(join(root, 'var', 'etcd', 'data'));
    const home = await podDir(join(root, 'home', 'nonroot'));
    // druid mounts the backup Secret at /var/etcd-backup: one file a field, as ebr reads them.
    const secret = at('etcd-backup');
    await mkdir(secret);
    const fields = {
      accessKeyID: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
      region: s3.region,
      endpoint: s3.endpoint,
      s3ForcePathStyle: 'true',
    };
    for (const [name, value] of Object.entries(fields)) await writeFile(join(secret, name), value, { mode: 0o644 });
    const kubeconfig = at('kubeconfig');
    await kube.writeKubeconfig(kubeconfig);
    await chmod(kubeconfig, 0o644);
    // etcd's config file as druid's ConfigMap gives it (the parts the sidecar reads), with a member name prefix:
    // druid then names the member Lease <prefix>-<pod>.
    const etcdConfig = at('etcd.conf.yaml');
    await writeFile(
      etcdConfig,
      'name: shoot-etcd-test-0\nmember-name-prefix: shoot\ninitial-advertise-peer-urls:\n  shoot-etcd-test-0:\n  - http://etcd-test-0.etcd-test-peer.test-ns.svc:2380\n',
      { mode: 0o644 },
    );
    // What druid creates before the pod starts: the member Lease and the two snapshot Leases, with no holder.
    for (const name of [MEMBER_LEASE, 'etcd-test-full-snap', 'etcd-test-delta-snap']) {
      kube.put('leases', NAMESPACE, name, (lease) => {
        lease.spec = { leaseDurationSeconds: name === MEMBER_LEASE ? 40 : 3600 };
      });
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: home,
      POD_NAME: 'etcd-test-0',
      POD_NAMESPACE: NAMESPACE,
      STORAGE_CONTAINER: 'default.bkp',
      AWS_APPLICATION_CREDENTIALS: secret,
      AWS_EC2_METADATA_DISABLED: 'true',
      KUBECONFIG: kubeconfig,
      ETCD_CONF: etcdConfig,
      // Not an argument: the test binds the sidecar's HTTP server to loopback through our own variable.
      ETCD_STEWARD_SERVER_HOST: '127.0.0.1',
    };
    const endpoint = cluster.endpoints[0];
    const port = await freePort();
    const places = { root, endpoint, port };

    const sidecarArgs = localised(await druidArgs('args-server-v0.37.1.txt'), places);
    const sidecar = startEtcdbrctl(sidecarArgs, env, at('sidecar.log'));
    onTestFinished(() => {
      sidecar.child.kill('SIGKILL');
    });
    await waitFor(
      'the sidecar to serve',
      async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok,
      60_000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${await sidecar.log()}`);
    });

    const store = await openStore('s3://default.bkp/tmp', { env: { ...process.env, ...env } });
    onTestFinished(() => store.close?.());
    const newest = async (kind: 'Full' | 'Incr'): Promise<CatalogEntry | undefined> =>
      (await listSnapshots(store)).filter((s) => s.kind === kind).at(-1);

    // The first full snapshot, in ebr's naming and gzip, and its Lease.
    await waitFor('the first full snapshot', async () => (await newest('Full')) !== undefined, 60_000);
    const full = (await newest('Full'))!;
    expect(full.name).toMatch(/^v2\/Full-00000000-\d{8}-\d{10}\.gz$/);
    const head = await store.get(full.name);
    const [magic] = (await head.toArray()) as Buffer[];
    expect(magic.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    await waitFor(
      'the full-snapshot Lease',
      async () =>
        spec(kube.get('leases', NAMESPACE, 'etcd-test-full-snap')).holderIdentity === String(full.lastRevision),
    );
    expect(Date.parse(spec(kube.get('leases', NAMESPACE, 'etcd-test-full-snap')).renewTime!)).toBe(
      full.createdAt * 1000,
    );

    // Changes go into deltas (gzip); the delta Lease follows them.
    const client = cluster.client();
    await writeWorkload(client, { keys: 100, valueSize: 64 });
    const revision = await etcdRevision(client);
    await waitFor(
      'a delta up to the written revision',
      async () => ((await newest('Incr'))?.lastRevision ?? 0) >= revision,
      120_000,
    );
    const delta = (await newest('Incr'))!;
    expect(delta.name).toMatch(/^v2\/Incr-\d{8}-\d{8}-\d{10}\.gz$/);
    await waitFor(
      'the delta-snapshot Lease',
      async () =>
        spec(kube.get('leases', NAMESPACE, 'etcd-test-delta-snap')).holderIdentity === String(delta.lastRevision),
    );

    // The member Lease: druid's name, <member>:<cluster>:<role>.
    const status = await memberStatus({ endpoints: [endpoint] });
    await waitFor(
      'the member Lease',
      async () => spec(kube.get('leases', NAMESPACE, MEMBER_LEASE)).holderIdentity === memberHolderIdentity(status),
    );
    expect(memberHolderIdentity(status)).toMatch(/^[0-9a-f]+:[0-9a-f]+:Leader$/);

    // The compaction Job folds the full snapshot and its deltas into one and renews the full-snapshot Lease.
    const compactArgs = localised(await druidArgs('args-compact.txt'), places);
    const compaction = startEtcdbrctl(compactArgs, env, at('compact.log'));
    expect(await compaction.exited, await compaction.log()).toBe(0);
    const compacted = (await newest('Full'))!;
    expect(compacted.lastRevision).toBe(delta.lastRevision);
    expect(compacted.name).toMatch(/\.gz$/);
    const fullLease = spec(kube.get('leases', NAMESPACE, 'etcd-test-full-snap'));
    expect(fullLease.holderIdentity).toBe(String(compacted.lastRevision));
    expect(Date.parse(fullLease.renewTime!)).toBe(compacted.createdAt * 1000);

    // Idle: no change, no new delta, yet the delta Lease is renewed every delta period (1m0s) with its revision,
    // so that druid's BackupReady condition stays true.
    const idleSince = Date.parse(spec(kube.get('leases', NAMESPACE, 'etcd-test-delta-snap')).renewTime!);
    await waitFor(
      'the delta-snapshot Lease renewed while idle',
      async () => Date.parse(spec(kube.get('leases', NAMESPACE, 'etcd-test-delta-snap')).renewTime!) > idleSince,
      150_000,
    );
    expect(spec(kube.get('leases', NAMESPACE, 'etcd-test-delta-snap')).holderIdentity).toBe(String(delta.lastRevision));
    expect((await newest('Incr'))?.name).toBe(delta.name);

    // The peer-TLS annotation druid waits for when it turns peer TLS on: the member's peer URL is http.
    expect(kube.get('leases', NAMESPACE, MEMBER_LEASE)?.metadata.annotations).toMatchObject({
      'member.etcd.gardener.cloud/tls-enabled': 'false',
    });

    // The one start-up line naming the flags with no effect, and no usage complaint.
    const log = await sidecar.log();
    const noEffect = log.split('\n').filter((line) => line.includes('accepted with no effect here'));
    expect(noEffect).toHaveLength(1);
    for (const flag of ['--auto-compaction-mode', '--use-etcd-wrapper', '--embedded-etcd-quota-bytes']) {
      expect(noEffect[0]).toContain(flag);
    }
    // The default spool, under --snapstore-temp-directory, belongs to the pod's user.
    const spool = await stat(join(root, 'var/etcd/data/temp/etcd-steward-spool'));
    if (asPodUser) expect(spool.uid).toBe(POD_USER);

    // Before the copy Job, as before a control plane migration: a final full snapshot, the source stopped.
    const final = await fetch(`http://127.0.0.1:${port}/snapshot/full?final=true`);
    expect(final.status).toBe(200);
    sidecar.child.kill('SIGTERM');
    expect(await sidecar.exited).toBe(0);
    const seeded = await runProgram(
      'etcd-copy-backups',
      ['copy', '--from', 's3://default.bkp/tmp', '--to', 's3://source-container/tmp'],
      env,
    );
    expect(seeded.code, seeded.stderr).toBe(0);

    // The copy Job: SOURCE_ variables for the source, waits for the final snapshot, copies.
    const copyEnv = {
      ...env,
      STORAGE_CONTAINER: 'target-container',
      SOURCE_STORAGE_CONTAINER: 'source-container',
      SOURCE_AWS_APPLICATION_CREDENTIALS: secret,
    };
    const copy = startEtcdbrctl(localised(await druidArgs('args-copy.txt'), places), copyEnv, at('copy.log'));
    expect(await copy.exited, await copy.log()).toBe(0);
    const target = await openStore('s3://target-container/tmp', { env: { ...process.env, ...env } });
    onTestFinished(() => target.close?.());
    const names = async (s: typeof store) => (await listSnapshots(s)).map((e) => e.name);
    const copied = await names(target);
    expect(copied.some((name) => name.endsWith('.final'))).toBe(true);
    expect(copied.every((name) => name.endsWith('.gz') || name.endsWith('.gz.final'))).toBe(true);
    expect(copied.length).toBeGreaterThan(0);
  }, 600_000);

  it("restore with ebr's restore flags restores the store ebr v0.23 wrote, found under HOME as a Local container", async () => {
    const home = at('restore-home');
    await cp(ebrStoreDir, join(home, 'ebr-store'), { recursive: true });
    const peerPort = await freePort();
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = at('restored.etcd');
    const args = [
      'restore',
      '--storage-provider=Local',
      '--store-container=ebr-store',
      `--data-dir=${dataDir}`,
      '--name=r0',
      `--initial-cluster=r0=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      '--initial-cluster-token=ebr',
      `--restoration-temp-snapshots-dir=${at('restoration.tmp')}`,
      '--max-fetchers=6',
      '--embedded-etcd-quota-bytes=8589934592',
      '--auto-compaction-mode=periodic',
      '--auto-compaction-retention=30m',
    ];
    // As the test's user: the data dir is the test's, not a pod's.
    const run = startEtcdbrctl(args, { PATH: process.env.PATH, HOME: home }, at('restore.log'), false);
    expect(await run.exited, await run.log()).toBe(0);
    const [keyspace] = await readRestored(
      [{ name: 'r0', dataDir, peerPort }],
      { initialCluster: `r0=${peer}`, clusterToken: 'ebr' },
      async (client) => {
        const all = await client.kv.range({ key: Buffer.from([0]), range_end: Buffer.from([0]) });
        return { revision: Number(all.header.revision), keys: all.kvs.length };
      },
    );
    expect(keyspace).toEqual({ revision: 9, keys: 6 });
    expect(await run.log()).toMatch(/accepted with no effect here: .*--restoration-temp-snapshots-dir/);
  });

  it('refuses an unknown flag with exit 2 before any work', async () => {
    const run = startEtcdbrctl(
      ['server', '--storage-provider=S3', '--no-such-flag'],
      { PATH: process.env.PATH },
      at('bad.log'),
      false,
    );
    expect(await run.exited).toBe(2);
    expect(await run.log()).toMatch(/unknown flag --no-such-flag/);
  });
});
