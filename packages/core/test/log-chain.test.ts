import { describe, expect, it } from 'vitest';
import type { CatalogEntry } from '../src/backup/snapshot-catalog.js';
import { kubernetesKey } from '../src/inspection/kubernetes-key.js';
import { logChain } from '../src/inspection/log-chain.js';

const entry = (kind: 'Full' | 'Incr', start: number, last: number, createdAt = last): CatalogEntry =>
  ({
    kind,
    startRevision: start,
    lastRevision: last,
    createdAt,
    name: `v2/${kind}-${String(start).padStart(8, '0')}-${String(last).padStart(8, '0')}-${createdAt}`,
    size: 100,
    metadata: {},
  }) as CatalogEntry;

describe('the chain etcd-restore log reads', () => {
  // two fulls, the deltas going on through the newer one, as the sidecar writes them
  const entries = [
    entry('Full', 0, 10),
    entry('Incr', 11, 20),
    entry('Incr', 21, 30),
    entry('Full', 0, 30),
    entry('Incr', 31, 40),
  ];

  it('goes back to the oldest full snapshot whose deltas reach the end: the longest history the store holds', () => {
    const chain = logChain(entries, {}, 'file:///s');
    expect(chain.full.lastRevision).toBe(10);
    expect(chain.deltas.map((d) => d.lastRevision)).toEqual([20, 30, 40]);
  });

  it('starts from the newest full snapshot before --from-revision: nothing older is needed', () => {
    expect(logChain(entries, { from: 35 }, 'file:///s').full.lastRevision).toBe(30);
    expect(logChain(entries, { from: 25 }, 'file:///s').full.lastRevision).toBe(10);
  });

  it('passes a gap by taking the chain that reaches furthest, and refuses a window the store cannot hold (exit 2)', () => {
    const gapped = entries.filter((e) => e.startRevision !== 21);
    const chain = logChain(gapped, {}, 'file:///s');
    expect(chain.full.lastRevision).toBe(30);
    expect(chain.lastRevision).toBe(40);
    expect(() => logChain(entries, { to: 41 }, 'file:///s')).toThrow(/past the newest revision in file:\/\/\/s \(40\)/);
    expect(() => logChain(entries, { to: 5 }, 'file:///s')).toThrow(/before the oldest full snapshot/);
  });
});

describe("a Kubernetes object's key", () => {
  it('gives the resource, namespace and name apart, a custom resource with its group, a cluster-scoped one without namespace', () => {
    expect(kubernetesKey('/registry/pods/kube-system/etcd-0')).toEqual({
      resource: 'pods',
      namespace: 'kube-system',
      name: 'etcd-0',
    });
    expect(kubernetesKey('/registry/namespaces/prod')).toEqual({ resource: 'namespaces', name: 'prod' });
    expect(kubernetesKey('/registry/druid.gardener.cloud/etcds/shoot--a/etcd-main')).toEqual({
      resource: 'etcds.druid.gardener.cloud',
      namespace: 'shoot--a',
      name: 'etcd-main',
    });
    expect(kubernetesKey('/registry/apiregistration.k8s.io/apiservices/v1.apps')).toEqual({
      resource: 'apiservices.apiregistration.k8s.io',
      name: 'v1.apps',
    });
    expect(kubernetesKey('/registry/pods/')).toBeUndefined();
    expect(kubernetesKey('/other/pods/a/b')).toBeUndefined();
  });
});
