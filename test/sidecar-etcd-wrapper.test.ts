import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import {
  createEtcdClient,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  LocalStore,
  memberList,
  takeFullSnapshot,
} from '@etcd-steward/core';
import { writeWorkload } from '@etcd-steward/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { damageKeyLeaf } from './data-dir-damage.js';
import { EtcdWrapperClient } from './etcd-wrapper-client.js';
import { metric, type SidecarProcess, snapshotsReach, startSidecar, waitFor } from './sidecar-helpers.js';
import { tempDir } from './temp-dir.js';

/** One etcd pod of druid's: its ports, its data volume, its sidecar and the etcd-wrapper stand-in. */
interface Pod {
  name: string;
  clientPort: number;
  peerPort: number;
  dir: string;
  sidecar?: SidecarProcess;
  wrapper?: EtcdWrapperClient;
}

const TOKEN = 'wrapper-test-token-0123456789';

/**
 * etcd-wrapper's calls, made by test/etcd-wrapper-client.ts as the wrapper makes them, against `etcd-snapshot run`
 * reading a config file shaped as etcd-druid renders it (the member map format, with a member-name-prefix); every
 * etcd is a real one started on what /config served (docs/etcd-wrapper.md).
 */
describe.each([
  ['open', false],
  ['protected (--server-token-file)', true],
])('etcd-wrapper beside the sidecar, access %s', (_label, protectedApi) => {
  const path = tempDir('sidecar-etcd-wrapper-');
  let pods: Pod[] = [];

  afterEach(async () => {
    for (const pod of pods) await pod.wrapper?.kill();
    await Promise.all(pods.map((pod) => pod.sidecar?.stop()));
    pods = [];
  });

  async function makePods(scenario: string, count: number): Promise<Pod[]> {
    for (let i = 0; i < count; i++) {
      const dir = path(scenario, `etcd-main-${i}`);
      await mkdir(join(dir, 'data'), { recursive: true });
      pods.push({ name: `etcd-main-${i}`, clientPort: await freePort(), peerPort: await freePort(), dir });
    }
    return pods;
  }

  const member = (pod: Pod) => `p-${pod.name}`;
  const peerUrl = (pod: Pod) => `http://127.0.0.1:${pod.peerPort}`;
  const clientUrl = (pod: Pod) => `http://127.0.0.1:${pod.clientPort}`;

  /**
   * druid's etcd.conf.yaml for `members` (its replicas), as this pod sees it mounted: the same for every pod but
   * the listen URLs (on one host, each member needs ports of its own; druid's listen on 0.0.0.0 with fixed ports).
   */
  async function writeConfig(pod: Pod, members: Pod[]): Promise<void> {
    const config = {
      name: 'etcd-config',
      'data-dir': join(pod.dir, 'data/new.etcd'),
      metrics: 'basic',
      'snapshot-count': 75000,
      'enable-grpc-gateway': false,
      'quota-backend-bytes': 8589934592,
      'initial-cluster-token': 'etcd-cluster',
      'initial-cluster-state': 'new',
      'initial-cluster': members.map((m) => `${member(m)}=${peerUrl(m)}`).join(','),
      'auto-compaction-mode': 'periodic',
      'auto-compaction-retention': '30m',
      'listen-peer-urls': peerUrl(pod),
      'listen-client-urls': clientUrl(pod),
      'initial-advertise-peer-urls': Object.fromEntries(members.map((m) => [member(m), [peerUrl(m)]])),
      'advertise-client-urls': Object.fromEntries(members.map((m) => [member(m), [clientUrl(m)]])),
      'member-name-prefix': 'p',
      'next-cluster-version-compatible': true,
      'backend-bbolt-freelist-type': 'array',
    };
    await writeFile(join(pod.dir, 'etcd.conf.yaml'), stringify(config));
  }

  async function startPod(pod: Pod, store: string, snapshots: boolean): Promise<void> {
    await startPodSidecar(pod, store, snapshots);
    pod.wrapper = new EtcdWrapperClient({
      sidecar: pod.sidecar!.url,
      dataVolume: join(pod.dir, 'data'),
      configFile: join(pod.dir, 'served.etcd.conf.yaml'),
      logFile: join(pod.dir, 'etcd.log'),
    });
  }

  async function startPodSidecar(pod: Pod, store: string, snapshots: boolean): Promise<void> {
    if (protectedApi) await writeFile(join(pod.dir, 'token'), TOKEN);
    pod.sidecar = await startSidecar({
      endpoint: clientUrl(pod),
      store: `file://${store}`,
      dir: join(pod.dir, 'sidecar'),
      args: [
        ...(snapshots ? [] : ['--no-snapshotter']),
        '--etcd-config-file',
        join(pod.dir, 'etcd.conf.yaml'),
        ...(protectedApi ? ['--server-token-file', join(pod.dir, 'token')] : []),
      ],
      env: { ...process.env, POD_NAME: pod.name, POD_NAMESPACE: 'shoot--a' },
    });
  }

  /**
   * Each etcd starts once its own initialization is done, as in the pods: the first runs alone, without a leader,
   * while the next one decides; the third finds the other two with a leader.
   */
  async function startOneByOne(members: Pod[]): Promise<Array<{ config: Record<string, unknown> }>> {
    const starts: Promise<{ config: Record<string, unknown> }>[] = [];
    for (const pod of members) {
      starts.push(pod.wrapper!.start());
      await waitFor(
        `${pod.name}'s config`,
        async () => pod.wrapper!.calls.some((c) => c.startsWith('/config 200')),
        120_000,
      );
    }
    return Promise.all(starts);
  }

  async function fingerprint(pod: Pod, revision?: number): Promise<KeyspaceFingerprint> {
    const client = createEtcdClient({ endpoints: [clientUrl(pod)] });
    try {
      return await keyspaceFingerprint(client, revision);
    } finally {
      client.close();
    }
  }

  /** A GET from another address of the loopback interface than the one etcd-wrapper's calls come from. */
  function getFrom(localAddress: string, url: string, token?: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(url, { localAddress, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('one member: a fresh start, a clean restart checks sanity, a damaged db is restored from the store', async () => {
    const [pod] = await makePods('one', 1);
    await writeConfig(pod, [pod]);
    await startPod(pod, path('one', 'store'), true);
    const wrapper = pod.wrapper!;
    const first = await wrapper.start();
    expect(first.mode).toBe('full');
    expect(first.config).toMatchObject({
      name: 'p-etcd-main-0',
      'initial-advertise-peer-urls': peerUrl(pod),
      'advertise-client-urls': clientUrl(pod),
      'initial-cluster': `p-etcd-main-0=${peerUrl(pod)}`,
      'initial-cluster-state': 'new',
    });
    expect(wrapper.calls.slice(0, 2)).toEqual(['/initialization/status 200', '/initialization/start?mode=full 200']);
    const client = createEtcdClient({ endpoints: [clientUrl(pod)] });
    let stored: KeyspaceFingerprint;
    try {
      await writeWorkload(client, { keys: 400, valueSize: 200 });
      stored = await keyspaceFingerprint(client);
    } finally {
      client.close();
    }
    await waitFor(
      'the snapshots to reach the last revision',
      () => snapshotsReach(pod.sidecar!.url, stored.revision),
      60_000,
    );

    // a clean stop: exit_code says terminated, so the next start asks for sanity
    await wrapper.stop();
    const again = await wrapper.start();
    expect(again.mode).toBe('sanity');
    expect(await fingerprint(pod)).toEqual(stored);

    // a crash, then a damaged leaf that only full mode finds: restored from the store, the old data moved aside
    await wrapper.kill();
    await damageKeyLeaf(join(pod.dir, 'data/new.etcd/member/snap/db'));
    const restored = await wrapper.start();
    expect(restored.mode).toBe('full');
    expect(await fingerprint(pod)).toEqual(stored);
    expect((await readdir(join(pod.dir, 'data'))).filter((n) => n.startsWith('new.etcd.bad-'))).toHaveLength(1);
    expect(await pod.sidecar!.log()).toMatch(/"case":"restore"/);

    if (protectedApi) {
      // etcd-wrapper's routes pass from 127.0.0.1 with no token; from another address they are the network's
      expect(await getFrom('127.0.0.1', `${pod.sidecar!.url}/config`)).toBe(200);
      expect(await getFrom('127.0.0.2', `${pod.sidecar!.url}/config`)).toBe(401);
      expect(await getFrom('127.0.0.2', `${pod.sidecar!.url}/initialization/start?mode=full`)).toBe(401);
      expect(await getFrom('127.0.0.2', `${pod.sidecar!.url}/initialization/status`)).toBe(401);
      // an acting route asks for the token from every address, the pod's own too
      expect(await getFrom('127.0.0.2', `${pod.sidecar!.url}/snapshot/full`)).toBe(401);
      expect(await getFrom('127.0.0.1', `${pod.sidecar!.url}/snapshot/full`)).toBe(401);
      expect(await getFrom('127.0.0.2', `${pod.sidecar!.url}/config`, TOKEN)).toBe(200);
    }
  });

  // With protection on, the wrapper's calls are the same in every scenario: the one-member and scale-up ones show them
  // passing; the rejoin and the whole cluster's restore run open only (each takes half a minute or more).
  const openOnly = protectedApi ? it.skip : it;

  openOnly(
    'three members start fresh; one whose data was wiped rejoins as a learner and is promoted; one keyspace',
    async () => {
      const three = await makePods('three', 3);
      for (const pod of three) await writeConfig(pod, three);
      for (const pod of three) await startPod(pod, path('three', 'store'), false);
      const started = await startOneByOne(three);
      for (const s of started) expect(s.config['initial-cluster-state']).toBe('new');
      const cases = await Promise.all(
        three.map(async (pod) => /"case":"([a-z-]+)"/.exec(await pod.sidecar!.log())?.[1]),
      );
      expect(cases[0]).toBe('fresh');
      expect(cases[1]).toBe('fresh');
      expect(['first-start', 'fresh']).toContain(cases[2]);

      const client = createEtcdClient({ endpoints: three.map(clientUrl) });
      try {
        await writeWorkload(client, { keys: 300, valueSize: 200 });
        // member 1: stopped cleanly, its data wiped, started again through the wrapper
        const wiped = three[1];
        await wiped.wrapper!.stop();
        await rm(join(wiped.dir, 'data/new.etcd'), { recursive: true });
        await writeWorkload(client, { keys: 100, valueSize: 200, prefix: '/after/' });
        const rejoined = await wiped.wrapper!.start();
        expect(rejoined.mode).toBe('sanity');
        expect(rejoined.config['initial-cluster-state']).toBe('existing');
        expect(await wiped.sidecar!.log()).toMatch(/"case":"rejoin"/);
        await waitFor(
          'the learner to be promoted',
          async () => (await memberList({ endpoints: [clientUrl(three[0])] })).every((m) => !m.isLearner && m.name),
          120_000,
        );
        expect(await wiped.sidecar!.log()).toMatch(/promoted the learner to a voting member/);
        expect(await metric(wiped.sidecar!.url, 'etcd_snapshot_learner_promotions_total')).toBe(1);
        const revision = Number((await client.kv.range({ key: Buffer.from('/') })).header.revision);
        const prints = [];
        for (const pod of three) prints.push(await fingerprint(pod, revision));
        expect(prints[0].keys).toBeGreaterThanOrEqual(400);
        expect(prints[1]).toEqual(prints[0]);
        expect(prints[2]).toEqual(prints[0]);
      } finally {
        client.close();
      }
    },
  );

  openOnly(
    "three members, the whole cluster lost: started one by one, they restore the store's backup as one cluster",
    async () => {
      const three = await makePods('lost', 3);
      for (const pod of three) await writeConfig(pod, three);
      for (const pod of three) await startPod(pod, path('lost', 'store'), false);
      await startOneByOne(three);
      const client = createEtcdClient({ endpoints: three.map(clientUrl) });
      let source: KeyspaceFingerprint;
      try {
        await writeWorkload(client, { keys: 300, valueSize: 200 });
        const saved = await takeFullSnapshot({
          connection: { endpoints: three.map(clientUrl) },
          store: new LocalStore(path('lost', 'store')),
          compression: 'none',
          tempDir: path('lost'),
        });
        // the member the snapshot came from may not have applied the last writes yet: its revision is the reference
        source = await keyspaceFingerprint(client, saved.revision);
      } finally {
        client.close();
      }
      for (const pod of three) {
        await pod.wrapper!.kill();
        await rm(join(pod.dir, 'data/new.etcd'), { recursive: true });
        pod.wrapper!.calls.length = 0;
      }
      await startOneByOne(three);
      const cases = await Promise.all(
        three.map(async (pod) => [...(await pod.sidecar!.log()).matchAll(/"case":"([a-z-]+)"/g)].at(-1)?.[1]),
      );
      expect(cases[0]).toBe('restore-new-cluster');
      // the third restores too, or (once the first two have a leader) rejoins them as a learner
      expect(['restore-new-cluster', 'rejoin']).toContain(cases[2]);
      await waitFor(
        'three voting members',
        async () => (await memberList({ endpoints: [clientUrl(three[0])] })).every((m) => !m.isLearner && m.name),
        120_000,
      );
      for (const pod of three) {
        const restored = await fingerprint(pod, source.revision);
        expect({ keys: restored.keys, sha256: restored.sha256 }).toEqual({ keys: source.keys, sha256: source.sha256 });
      }
    },
  );

  it('a scale-up from one member to three: each new member joins as a learner and is promoted, by a restarted sidecar too', async () => {
    const all = await makePods('scale', 3);
    await writeConfig(all[0], [all[0]]);
    await startPod(all[0], path('scale', 'store'), false);
    await all[0].wrapper!.start();
    const client = createEtcdClient({ endpoints: [clientUrl(all[0])] });
    try {
      await writeWorkload(client, { keys: 300, valueSize: 200 });
      // druid scales the Etcd to 3 replicas: one config for three members
      for (const pod of all) await writeConfig(pod, all);
      const learner = async (pod: Pod) =>
        (await memberList({ endpoints: [clientUrl(all[0])] })).find((m) => m.peerUrls.includes(peerUrl(pod)))
          ?.isLearner;
      for (const pod of all.slice(1)) {
        await startPod(pod, path('scale', 'store'), false);
        // the third's sidecar killed once etcd-wrapper has its config, before etcd runs: the learner cannot have
        // been promoted; the restarted sidecar finds it a learner and promotes it
        const joined = await pod.wrapper!.start(pod === all[2] ? () => pod.sidecar!.kill() : undefined);
        expect(joined.config['initial-cluster-state']).toBe('existing');
        if (pod === all[2]) {
          expect(await learner(pod)).toBe(true);
          await startPodSidecar(pod, path('scale', 'store'), false);
        }
        await waitFor(
          `${pod.name} to be promoted`,
          async () => (await memberList({ endpoints: [clientUrl(all[0])] })).every((m) => !m.isLearner && m.name),
          120_000,
        );
      }
      const members = await memberList({ endpoints: [clientUrl(all[0])] });
      expect(members.map((m) => m.name).sort()).toEqual(all.map(member));
      for (const pod of all.slice(1)) {
        expect(await pod.sidecar!.log()).toMatch(/promoted the learner to a voting member/);
        expect(await metric(pod.sidecar!.url, 'etcd_snapshot_learner_promotions_total')).toBe(1);
      }
      const revision = Number((await client.kv.range({ key: Buffer.from('/') })).header.revision);
      const prints = [];
      for (const pod of all) prints.push(await fingerprint(pod, revision));
      expect(prints[0].keys).toBeGreaterThan(250);
      expect(prints[1]).toEqual(prints[0]);
      expect(prints[2]).toEqual(prints[0]);
    } finally {
      client.close();
    }
  });
});
