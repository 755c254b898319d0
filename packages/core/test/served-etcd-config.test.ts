import type { EtcdMember } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderEtcdConfig } from '../src/bootstrap/index.js';
import { clusterClientUrls, memberConfig, parseEtcdConfig, podMember } from '../src/kubernetes/index.js';

const INITIAL_CLUSTER = [0, 1, 2]
  .map((i) => `etcd-main-${i}=https://etcd-main-${i}.etcd-main-peer.shoot--a.svc:2380`)
  .join(',');

/** druid's file before 2024: one template string per advertise key, for every member alike. */
const OLDER = `name: etcd-config
data-dir: /var/etcd/data/new.etcd
initial-cluster-token: etcd-cluster
initial-cluster-state: new
initial-cluster: ${INITIAL_CLUSTER}
listen-peer-urls: https://0.0.0.0:2380
listen-client-urls: https://0.0.0.0:2379
initial-advertise-peer-urls: https@etcd-main-peer@shoot--a@2380
advertise-client-urls: https@etcd-main-peer@shoot--a@2379
quota-backend-bytes: 8589934592
auto-compaction-retention: "30"
`;

/** druid's file since: a map from member name to that member's URLs, and an optional member-name-prefix. */
const NEWER = `name: etcd-config
data-dir: /var/etcd/data/new.etcd
initial-cluster-state: new
initial-cluster: ${INITIAL_CLUSTER.replaceAll('etcd-main-', 'p-etcd-main-').replaceAll('//p-', '//')}
member-name-prefix: p
initial-advertise-peer-urls:
${[0, 1, 2].map((i) => `  p-etcd-main-${i}:\n  - https://etcd-main-${i}.etcd-main-peer.shoot--a.svc:2380\n  - https://10.0.0.${i}:2380`).join('\n')}
advertise-client-urls:
${[0, 1, 2].map((i) => `  p-etcd-main-${i}:\n  - https://etcd-main-${i}.etcd-main-peer.shoot--a.svc:2379`).join('\n')}
`;

function member(name: string, peer: string, extra: Partial<EtcdMember> = {}): EtcdMember {
  return {
    id: String(name.length),
    name,
    peerUrls: [peer],
    clientUrls: name ? ['https://c:2379'] : [],
    isLearner: false,
    ...extra,
  };
}

describe("druid's etcd config file, served for one pod", () => {
  it('the older template format gives the pod its own URLs, the service and namespace kept', () => {
    const config = parseEtcdConfig(OLDER, 'etcd.conf.yaml');
    const pod = podMember(config, 'etcd-main-1', 'etcd.conf.yaml');
    expect(pod).toEqual({
      name: 'etcd-main-1',
      peerUrls: ['https://etcd-main-1.etcd-main-peer.shoot--a.svc:2380'],
      clientUrls: ['https://etcd-main-1.etcd-main-peer.shoot--a.svc:2379'],
    });
    expect(clusterClientUrls(config, 'f')).toEqual(
      [0, 1, 2].map((i) => `https://etcd-main-${i}.etcd-main-peer.shoot--a.svc:2379`),
    );
    const served = parse(renderEtcdConfig(config, pod, undefined).text);
    expect(served).toMatchObject({
      name: 'etcd-main-1',
      'initial-advertise-peer-urls': 'https://etcd-main-1.etcd-main-peer.shoot--a.svc:2380',
      'advertise-client-urls': 'https://etcd-main-1.etcd-main-peer.shoot--a.svc:2379',
      'initial-cluster': INITIAL_CLUSTER,
      'initial-cluster-state': 'new',
      'quota-backend-bytes': 8589934592,
      'auto-compaction-retention': '30', // stays a string: etcd's field is one
    });
  });

  it('the newer map format picks the member named by member-name-prefix and POD_NAME, all its URLs', () => {
    const config = parseEtcdConfig(NEWER, 'f');
    const pod = podMember(config, 'etcd-main-2', 'f');
    expect(pod.name).toBe('p-etcd-main-2');
    expect(pod.peerUrls).toEqual(['https://etcd-main-2.etcd-main-peer.shoot--a.svc:2380', 'https://10.0.0.2:2380']);
    const served = parse(renderEtcdConfig(config, pod, undefined).text);
    expect(served['initial-advertise-peer-urls']).toBe(
      'https://etcd-main-2.etcd-main-peer.shoot--a.svc:2380,https://10.0.0.2:2380',
    );
    expect(memberConfig(config, pod).initialClusterToken).toBe('etcd-cluster');
    expect(() => podMember(config, 'etcd-main-7', 'f')).toThrow(/no URLs for member p-etcd-main-7.*POD_NAME/);
  });

  it('with a quorum: initial-cluster trimmed to the listed members and this one; existing while a learner is listed', () => {
    const config = parseEtcdConfig(OLDER, 'f');
    const pod = podMember(config, 'etcd-main-2', 'f');
    const url = (i: number) => `https://etcd-main-${i}.etcd-main-peer.shoot--a.svc:2380`;
    // a scale-up: member 0 runs, member 2 was just added as a learner (no name yet), member 1 not yet
    const scaleUp = renderEtcdConfig(config, pod, {
      state: 'quorum',
      endpoint: 'x',
      members: [member('etcd-main-0', url(0)), member('', url(2), { isLearner: true })],
    });
    expect(scaleUp.initialCluster).toBe(`etcd-main-0=${url(0)},etcd-main-2=${url(2)}`);
    expect(scaleUp.initialClusterState).toBe('existing');
    // all three voters: as the file says, new (etcd ignores both on a data dir that holds data)
    const all = renderEtcdConfig(config, pod, {
      state: 'quorum',
      endpoint: 'x',
      members: [0, 1, 2].map((i) => member(`etcd-main-${i}`, url(i))),
    });
    expect(all.initialCluster).toBe(INITIAL_CLUSTER);
    expect(all.initialClusterState).toBe('new');
    // no quorum: the file's list as it is
    expect(renderEtcdConfig(config, pod, { state: 'unreachable', failures: [] }).initialCluster).toBe(INITIAL_CLUSTER);
  });

  it('refuses a file it cannot serve, saying what is wrong', () => {
    expect(() => parseEtcdConfig('- a\n', 'f')).toThrow(/does not hold a YAML map/);
    expect(() => parseEtcdConfig('name: x\n', 'f')).toThrow(/no initial-cluster/);
    const bad = parseEtcdConfig(OLDER.replace('https@etcd-main-peer@shoot--a@2380', 'https@etcd-main-peer'), 'f');
    expect(() => podMember(bad, 'etcd-main-0', 'f')).toThrow(/not druid's <scheme>@<service>@<namespace>@<port>/);
    expect(() => podMember(parseEtcdConfig(OLDER, 'f'), '', 'f')).toThrow(/POD_NAME is not set/);
  });
});
