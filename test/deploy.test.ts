import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { acceptedFlags, type CommandFlags, programFlags, programs } from '../scripts/program-flags.ts';

// deploy/ checked offline: each object against the Kubernetes OpenAPI schema (kubernetes-models), each
// program a container runs against that program's --help, the kustomization against the files.
const deploy = fileURLToPath(new URL('../deploy/', import.meta.url));

type Manifest = { file: string; doc: Record<string, unknown> & { apiVersion: string; kind: string } };

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? yamlFiles(join(dir, e.name)) : e.name.endsWith('.yaml') ? [join(dir, e.name)] : [],
  );
}

const manifests: Manifest[] = yamlFiles(deploy).flatMap((path) =>
  parseAllDocuments(readFileSync(path, 'utf8')).map((d) => ({ file: relative(deploy, path), doc: d.toJS() })),
);
/** Files in deploy/ that are not Kubernetes objects: the plain Prometheus rules file, for a Prometheus without the operator. */
const notObjects = new Set(['monitoring/etcd-steward.rules.yaml']);
const objects = manifests.filter((m) => m.doc.kind !== 'Kustomization' && !notObjects.has(m.file));

/**
 * The schema-checking model of an object's kind, e.g. kubernetes-models/apps/v1/StatefulSet, or the Prometheus
 * Operator's models for its resources (PrometheusRule).
 */
async function validate(doc: Manifest['doc']): Promise<void> {
  const models = doc.apiVersion.startsWith('monitoring.coreos.com/')
    ? '@kubernetes-models/prometheus-operator'
    : 'kubernetes-models';
  const module = await import(`${models}/${doc.apiVersion}/${doc.kind}`);
  new module[doc.kind](doc).validate();
}

interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
}
interface Container {
  name: string;
  command?: string[];
  args?: string[];
}

function podSpec(doc: Manifest['doc']): PodSpec | undefined {
  // biome-ignore lint/suspicious/noExplicitAny: a manifest is untyped YAML; the schema test checks its shape
  const spec = doc.spec as Record<string, any> | undefined;
  if (doc.kind === 'CronJob') return spec?.jobTemplate.spec.template.spec;
  if (doc.kind === 'StatefulSet' || doc.kind === 'Job') return spec?.template.spec;
  return undefined;
}

/** Every container that runs one of the programs: which, with which command, and its flags. */
function programRuns(): { where: string; program: string; command?: string; flags: string[] }[] {
  const names = new Set(programs().map((p) => p.name));
  return objects.flatMap(({ file, doc }) => {
    const pod = podSpec(doc);
    return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])].flatMap((c) => {
      const argv = [...(c.command ?? []), ...(c.args ?? [])];
      if (!names.has(argv[0])) return [];
      const command = argv[1] && !argv[1].startsWith('-') ? argv[1] : undefined;
      const flags = argv.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split('=')[0]);
      return [{ where: `${file} ${doc.kind}/${c.name}`, program: argv[0], command, flags }];
    });
  });
}

describe('deploy/', () => {
  let all: CommandFlags[];
  beforeAll(() => {
    all = programFlags();
  });

  it('every object is valid against the Kubernetes OpenAPI schema of its kind', async () => {
    expect(objects.length).toBeGreaterThan(8);
    for (const { file, doc } of objects) {
      await expect(validate(doc), `${file} ${doc.kind}`).resolves.toBeUndefined();
    }
  });

  it('the schema check refuses a broken object', async () => {
    const statefulSet = objects.find((m) => m.doc.kind === 'StatefulSet');
    const broken = structuredClone(statefulSet?.doc) as Manifest['doc'];
    (broken.spec as Record<string, unknown>).replicas = 'three';
    await expect(validate(broken)).rejects.toThrow(/replicas/);
  });

  it('the schema check refuses a broken PrometheusRule', async () => {
    const rule = objects.find((m) => m.doc.kind === 'PrometheusRule');
    const broken = structuredClone(rule?.doc) as Manifest['doc'];
    (broken.spec as { groups: { rules: unknown }[] }).groups[0].rules = 'none';
    await expect(validate(broken)).rejects.toThrow(/rules/);
  });

  it('runs each role: bootstrap before etcd, the sidecar beside it, a restore Job, compaction, gc and drill CronJobs', () => {
    const runs = programRuns().map((r) =>
      `${r.where.split(' ')[1].split('/')[0]} ${r.program} ${r.command ?? ''}`.trim(),
    );
    expect(runs.sort()).toEqual(
      [
        'CronJob etcd-compact',
        'CronJob etcd-copy-backups verify',
        'CronJob etcd-gc',
        'Job etcd-restore',
        'StatefulSet etcd-snapshot run',
        'StatefulSet etcd-validate bootstrap',
      ].sort(),
    );
    const etcd = podSpec(objects.find((m) => m.doc.kind === 'StatefulSet')?.doc ?? ({} as Manifest['doc']));
    expect(etcd?.initContainers?.[0].command?.slice(0, 2)).toEqual(['etcd-validate', 'bootstrap']);
  });

  it("every flag a manifest passes to a program is in that program's --help", () => {
    const problems = programRuns().flatMap((run) => {
      const accepted = acceptedFlags(all, run.program, run.command);
      return run.flags.filter((f) => !accepted.has(f)).map((f) => `${run.where}: ${run.program} has no --${f}`);
    });
    expect(problems).toEqual([]);
  });

  it('the kustomization lists files that exist; RBAC grants only Leases and EtcdMembers, by name but create', () => {
    const kustomization = manifests.find((m) => m.doc.kind === 'Kustomization')?.doc as unknown as {
      resources: string[];
    };
    const files = new Set(manifests.map((m) => m.file));
    for (const resource of kustomization.resources) expect(files, resource).toContain(resource);
    const rules = objects
      .filter((m) => m.doc.kind === 'Role' || m.doc.kind === 'ClusterRole')
      .flatMap(
        (m) => m.doc.rules as { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[],
      );
    expect(objects.some((m) => m.doc.kind === 'ClusterRole')).toBe(false);
    for (const rule of rules) {
      expect(rule.resources.every((r) => ['leases', 'etcdmembers', 'etcdmembers/status'].includes(r))).toBe(true);
      // Kubernetes cannot limit create by name: the one rule without names creates a missing Lease, nothing else.
      if (!rule.resourceNames) {
        expect(rule).toEqual({ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] });
        continue;
      }
      expect(rule.verbs.every((v) => ['get', 'update', 'patch'].includes(v))).toBe(true);
    }
  });

  it("has a Secret in ebr's format for each cloud store provider", () => {
    const secrets = objects.filter((m) => m.doc.kind === 'Secret');
    const keys = secrets.map((s) =>
      Object.keys(s.doc.stringData as object)
        .sort()
        .join(','),
    );
    expect(keys).toEqual(
      expect.arrayContaining([
        'accessKeyID,region,secretAccessKey',
        'serviceaccount.json',
        'storageAccount,storageKey',
      ]),
    );
  });
});
