/**
 * A small Kubernetes API server, faithful enough for the real `@kubernetes/client-node`: namespaced
 * `coordination.k8s.io/v1` Leases and druid's `druid.gardener.cloud/v1alpha1` EtcdMembers (with a status
 * subresource) — get, create, update (PUT), JSON merge patch — with resourceVersion optimistic concurrency
 * (409 Conflict as the API server words it), 404 NotFound and 409 AlreadyExists as `Status` objects, HTTPS (the
 * client refuses plain HTTP) and a bearer token every request must carry. No watch, no list. No kube-apiserver
 * installs here, hence this one.
 */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { closeServer, listenOnLoopback, type TestServer } from './test-server.ts';

/** An object as stored: its JSON form, metadata included. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** A write the server accepted (or refused), in the order they came. */
export interface KubeWrite {
  method: string;
  resource: Resource;
  namespace: string;
  name: string;
  status: number;
  /** The object after the write, when it was accepted. */
  object?: KubeObject;
}

export type Resource = 'leases' | 'etcdmembers';

export interface KubeApiTestServer extends TestServer {
  readonly token: string;
  /** Writes a kubeconfig for this server to `path`. */
  writeKubeconfig(path: string): Promise<void>;
  get(resource: Resource, namespace: string, name: string): KubeObject | undefined;
  /** Creates or changes an object as another writer would: its resourceVersion moves on. */
  put(resource: Resource, namespace: string, name: string, change: (object: KubeObject) => void): KubeObject;
  /** The next client write to this object first meets `change` done by another writer (so its version is stale). */
  changeBeforeNextWrite(
    resource: Resource,
    namespace: string,
    name: string,
    change: (object: KubeObject) => void,
  ): void;
  writes(): readonly KubeWrite[];
  /** Stops listening (connections refused) until `resume`, on the same port. */
  pause(): Promise<void>;
  resume(): Promise<void>;
}

const KINDS: Record<Resource, { group: string; version: string; kind: string; subresources: boolean }> = {
  leases: { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', subresources: false },
  etcdmembers: { group: 'druid.gardener.cloud', version: 'v1alpha1', kind: 'EtcdMember', subresources: true },
};

class StatusError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details?: Record<string, string>;

  constructor(code: number, reason: string, message: string, details?: Record<string, string>) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }
}

/** PEM files: the server's certificate for 127.0.0.1 and its key, and the CA that signed it. */
export interface KubeApiCertificates {
  ca: string;
  serverCert: string;
  serverKey: string;
}

export async function startKubeApiServer(certificates: KubeApiCertificates): Promise<KubeApiTestServer> {
  const token = randomUUID();
  const ca = await readFile(certificates.ca);
  const objects = new Map<string, KubeObject>(); // `${resource}/${namespace}/${name}`
  const pendingChanges = new Map<string, (object: KubeObject) => void>();
  const log: KubeWrite[] = [];
  let version = 1000;
  const key = (resource: Resource, namespace: string, name: string) => `${resource}/${namespace}/${name}`;
  const qualified = (resource: Resource) => `${resource}.${KINDS[resource].group}`;

  const tls = { cert: await readFile(certificates.serverCert), key: await readFile(certificates.serverKey) };
  const server = createServer(tls, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      const e = err instanceof StatusError ? err : new StatusError(500, 'InternalError', String(err));
      send(res, e.code, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: e.message,
        reason: e.reason,
        details: e.details,
        code: e.code,
      });
    });
  });

  function stored(resource: Resource, namespace: string, name: string, object: KubeObject): KubeObject {
    object.metadata.resourceVersion = String(++version);
    objects.set(key(resource, namespace, name), object);
    return object;
  }

  function notFound(resource: Resource, name: string): StatusError {
    return new StatusError(404, 'NotFound', `${qualified(resource)} "${name}" not found`, {
      name,
      group: KINDS[resource].group,
      kind: resource,
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${token}`) {
      throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    }
    const url = new URL(req.url ?? '/', 'http://kube');
    const match = /^\/apis\/([^/]+)\/([^/]+)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?(?:\/(status))?$/.exec(
      url.pathname,
    );
    const resource = match?.[4] as Resource | undefined;
    if (!match || !resource || !(resource in KINDS) || KINDS[resource].group !== match[1]) {
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    }
    const type = KINDS[resource];
    if (type.version !== match[2])
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    const namespace = decodeURIComponent(match[3]);
    const name = match[5] === undefined ? undefined : decodeURIComponent(match[5]);
    const status = match[6] !== undefined;
    if (status && !type.subresources)
      throw new StatusError(404, 'NotFound', 'the server could not find the requested resource');
    const method = req.method ?? 'GET';
    const write = (code: number, object?: KubeObject) =>
      log.push({
        method,
        resource,
        namespace,
        name: name ?? object?.metadata.name ?? '',
        status: code,
        object: object && structuredClone(object),
      });

    if (name === undefined) {
      if (method !== 'POST') throw new StatusError(405, 'MethodNotAllowed', `${method} is not supported here`);
      const body = (await readJson(req)) as KubeObject;
      if (resource === 'leases') checkLeaseTimes(body);
      const newName = body.metadata?.name;
      if (!newName)
        throw new StatusError(422, 'Invalid', `${type.kind}.${type.group} is invalid: metadata.name: Required value`);
      if (body.metadata.namespace && body.metadata.namespace !== namespace) {
        throw new StatusError(
          400,
          'BadRequest',
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      if (objects.has(key(resource, namespace, newName))) {
        write(409);
        throw new StatusError(409, 'AlreadyExists', `${qualified(resource)} "${newName}" already exists`, {
          name: newName,
          group: type.group,
          kind: resource,
        });
      }
      const object: KubeObject = {
        ...body,
        apiVersion: `${type.group}/${type.version}`,
        kind: type.kind,
        metadata: {
          ...body.metadata,
          name: newName,
          namespace,
          uid: randomUUID(),
          creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
          resourceVersion: '',
        },
      };
      // With a status subresource, a create ignores the status it is sent.
      if (type.subresources) delete object.status;
      stored(resource, namespace, newName, object);
      write(201, object);
      return send(res, 201, object);
    }

    const current = objects.get(key(resource, namespace, name));
    if (method === 'GET') {
      if (!current) throw notFound(resource, name);
      return send(res, 200, current);
    }
    if (method !== 'PUT' && method !== 'PATCH')
      throw new StatusError(405, 'MethodNotAllowed', `${method} is not supported here`);
    const body = (await readJson(req)) as KubeObject;
    if (resource === 'leases') checkLeaseTimes(body);
    const change = pendingChanges.get(key(resource, namespace, name));
    if (change && current) {
      pendingChanges.delete(key(resource, namespace, name));
      change(current);
      stored(resource, namespace, name, current);
    }
    if (!current) {
      write(404);
      throw notFound(resource, name);
    }
    let next: KubeObject;
    if (method === 'PATCH') {
      const contentType = req.headers['content-type'] ?? '';
      if (!contentType.startsWith('application/merge-patch+json')) {
        throw new StatusError(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json`,
        );
      }
      next = mergePatch(structuredClone(current), body) as KubeObject;
    } else {
      if (body.metadata?.name !== name) {
        throw new StatusError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
      }
      next = structuredClone(body);
    }
    const wanted =
      (method === 'PATCH' ? (body.metadata?.resourceVersion as string | undefined) : next.metadata.resourceVersion) ??
      '';
    if (wanted !== '' && wanted !== current.metadata.resourceVersion) {
      write(409);
      throw new StatusError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualified(resource)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, group: type.group, kind: resource },
      );
    }
    // The status subresource changes the status alone; the object itself, everything but the status.
    if (type.subresources) {
      next = status ? { ...current, status: next.status } : { ...next, status: current.status };
    }
    next.apiVersion = current.apiVersion;
    next.kind = current.kind;
    next.metadata = {
      ...next.metadata,
      name,
      namespace,
      uid: current.metadata.uid,
      creationTimestamp: current.metadata.creationTimestamp,
      resourceVersion: '',
    };
    stored(resource, namespace, name, next);
    write(200, next);
    return send(res, 200, next);
  }

  // An https.Server listens and closes as an http.Server does.
  const endpoint = (await listenOnLoopback(server as unknown as Server)).replace(/^http:/, 'https:');
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint,
    token,
    async writeKubeconfig(path) {
      const config = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          { name: 'test', cluster: { server: endpoint, 'certificate-authority-data': ca.toString('base64') } },
        ],
        users: [{ name: 'sidecar', user: { token } }],
        contexts: [{ name: 'test', context: { cluster: 'test', user: 'sidecar' } }],
        'current-context': 'test',
      };
      // JSON is YAML: the client reads either.
      await writeFile(path, JSON.stringify(config, null, 2));
    },
    get: (resource, namespace, name) => {
      const object = objects.get(key(resource, namespace, name));
      return object && structuredClone(object);
    },
    put(resource, namespace, name, change) {
      const type = KINDS[resource];
      const object = objects.get(key(resource, namespace, name)) ?? {
        apiVersion: `${type.group}/${type.version}`,
        kind: type.kind,
        metadata: { name, namespace, uid: randomUUID(), resourceVersion: '' },
      };
      change(object);
      return structuredClone(stored(resource, namespace, name, object));
    },
    changeBeforeNextWrite(resource, namespace, name, change) {
      pendingChanges.set(key(resource, namespace, name), change);
    },
    writes: () => log,
    async pause() {
      await closeServer(server as unknown as Server);
    },
    async resume() {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve());
      });
    },
    async stop() {
      if (server.listening) await closeServer(server as unknown as Server);
    },
  };
}

/** A Lease's acquireTime and renewTime are MicroTime: RFC 3339 with exactly six fraction digits, as Go parses them. */
function checkLeaseTimes(lease: KubeObject): void {
  const spec = (lease.spec ?? {}) as Record<string, unknown>;
  for (const field of ['acquireTime', 'renewTime']) {
    const value = spec[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/.test(value)) {
      throw new StatusError(
        400,
        'BadRequest',
        `Lease in version "v1" cannot be handled as a Lease: parsing time ${JSON.stringify(value)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse`,
      );
    }
  }
}

/** RFC 7386: null deletes, objects merge, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? (target as Record<string, unknown>) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete result[k];
    else result[k] = mergePatch(result[k], v);
  }
  return result;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text || '{}');
  } catch {
    throw new StatusError(400, 'BadRequest', `the body of the request is not JSON: ${text.slice(0, 100)}`);
  }
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
