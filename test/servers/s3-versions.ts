/**
 * S3 bucket versioning and Object Lock, added in front of fauxqs (which has neither), so that the real
 * `@aws-sdk/client-s3` meets what a versioned, locked bucket does (docs/stores.md, "Immutable stores"):
 *
 * - GetBucketVersioning / PutBucketVersioning (`?versioning`); CreateBucket with `x-amz-bucket-object-lock-enabled`
 *   turns versioning on for good; GetObjectLockConfiguration / PutObjectLockConfiguration (`?object-lock`) with a
 *   default retention (COMPLIANCE or GOVERNANCE, days or years) that every new version gets.
 * - Every PUT (single, multipart complete, copy) of a versioned bucket adds a version (`x-amz-version-id`); what was
 *   there before versioning was turned on is the `null` version.
 * - DELETE without a version id adds a delete marker and hides the key; with one, it removes that version, unless
 *   Object Lock retains it (COMPLIANCE until its date; GOVERNANCE unless `x-amz-bypass-governance-retention`; a legal
 *   hold): 403 AccessDenied, as S3 answers.
 * - GET/HEAD with `versionId` read that version (a marker's: 405 with `x-amz-delete-marker`); without one, a key whose
 *   newest version is a marker answers 404 with `x-amz-delete-marker: true`.
 * - ListObjectVersions (`?versions`): versions and markers newest first per key, keys in byte order, paged with
 *   key and version id markers (`pageSize` caps a page, to test paging).
 *
 * The newest version that is not a marker is what fauxqs holds under the key, so that its ListObjectsV2, GET and
 * HEAD serve the current objects as they are; the versions are kept here. Objects stay in memory.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

type LockMode = 'COMPLIANCE' | 'GOVERNANCE';

/** An object as fauxqs keeps it (the fields read here). */
interface FauxObject {
  body: Buffer;
  contentType: string;
  contentLength: number;
  etag: string;
  lastModified: Date;
  metadata: Record<string, string>;
}

interface FauxStore {
  buckets: Map<string, Map<string, FauxObject>>;
}

interface Version {
  id: string;
  marker: boolean;
  object?: FauxObject;
  lastModified: Date;
  retainUntil?: Date;
  mode?: LockMode;
  legalHold?: boolean;
}

interface BucketState {
  versioning?: 'Enabled' | 'Suspended';
  denyVersionReads?: boolean;
  lock?: { mode?: LockMode; days?: number; years?: number };
}

interface HookRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  raw: IncomingMessage;
}

interface HookReply {
  statusCode: number;
  raw: ServerResponse;
  status(code: number): HookReply;
  header(name: string, value: string | number): HookReply;
  send(payload?: unknown): HookReply;
}

interface HookApp {
  addHook(name: 'onRequest', hook: (request: HookRequest, reply: HookReply) => Promise<HookReply | undefined>): unknown;
  addHook(
    name: 'onSend',
    hook: (request: HookRequest, reply: HookReply, payload: unknown) => Promise<unknown>,
  ): unknown;
}

export interface BucketVersioning {
  versioning?: 'Enabled' | 'Suspended';
  /** GetBucketVersioning and ListObjectVersions answer 403, as to credentials without the permissions. */
  denyVersionReads?: boolean;
  /** Object Lock on the bucket (which keeps versioning on), with the default retention new versions get. */
  objectLock?: { mode?: LockMode; days?: number; years?: number };
}

export interface VersioningControls {
  /** What CreateBucket with object lock, PutBucketVersioning and PutObjectLockConfiguration set. */
  configureBucket(bucket: string, config: BucketVersioning): void;
  /** The versions of a key, newest first, as ListObjectVersions gives them. */
  versionsOf(bucket: string, key: string): { versionId: string; deleteMarker: boolean; size: number }[];
}

const DAY_MS = 86_400_000;
const NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';

export function addVersioning(app: HookApp, store: FauxStore, options: { pageSize?: number } = {}): VersioningControls {
  const states = new Map<string, BucketState>();
  /** Per bucket, per key: oldest first. */
  const versions = new Map<string, Map<string, Version[]>>();

  const versionsIn = (bucket: string) => {
    const map = versions.get(bucket) ?? new Map<string, Version[]>();
    versions.set(bucket, map);
    return map;
  };
  const versioned = (bucket: string) => states.get(bucket)?.versioning !== undefined;

  /** What was in the bucket before versioning came on: each key's `null` version. */
  const takeNullVersions = (bucket: string) => {
    const map = versionsIn(bucket);
    for (const [key, object] of store.buckets.get(bucket) ?? []) {
      if (!map.has(key)) map.set(key, [{ id: 'null', marker: false, object, lastModified: object.lastModified }]);
    }
  };

  const setVersioning = (bucket: string, status: 'Enabled' | 'Suspended') => {
    const state = states.get(bucket) ?? {};
    if (!versioned(bucket)) takeNullVersions(bucket);
    states.set(bucket, { ...state, versioning: status });
  };

  /** fauxqs serves the newest version, or nothing when that is a delete marker. */
  const materialize = (bucket: string, key: string) => {
    const objects = store.buckets.get(bucket);
    const latest = versionsIn(bucket).get(key)?.at(-1);
    if (!objects) return;
    if (latest && !latest.marker && latest.object) objects.set(key, latest.object);
    else objects.delete(key);
  };

  /** A new version: under Suspended versioning it is the `null` one, replacing the `null` one there was. */
  const addVersion = (bucket: string, key: string, version: Omit<Version, 'id'>): Version => {
    const list = versionsIn(bucket).get(key) ?? [];
    const suspended = states.get(bucket)?.versioning === 'Suspended';
    const kept = suspended ? list.filter((v) => v.id !== 'null') : list;
    // versions of a key are told apart by time too (clients merge S3's two lists by it): never the same millisecond
    const last = kept.at(-1)?.lastModified.getTime() ?? 0;
    const lastModified = new Date(Math.max(version.lastModified.getTime(), last + 1));
    const added: Version = { ...version, lastModified, id: suspended ? 'null' : randomBytes(16).toString('base64url') };
    versionsIn(bucket).set(key, [...kept, added]);
    return added;
  };

  const defaultRetention = (bucket: string): Pick<Version, 'retainUntil' | 'mode'> => {
    const lock = states.get(bucket)?.lock;
    if (!lock?.mode) return {};
    const ms = (lock.days ?? 0) * DAY_MS + (lock.years ?? 0) * 365 * DAY_MS;
    return { mode: lock.mode, retainUntil: new Date(Date.now() + ms) };
  };

  /** Why Object Lock keeps this version from deletion now, or undefined. */
  const retainedBy = (v: Version, bypassGovernance: boolean): string | undefined => {
    if (v.legalHold) return 'legal hold';
    if (!v.retainUntil || v.retainUntil.getTime() <= Date.now()) return undefined;
    if (v.mode === 'GOVERNANCE' && bypassGovernance) return undefined;
    return `${v.mode} retention`;
  };

  const lockHeaders = (reply: HookReply, v: Version) => {
    if (v.mode && v.retainUntil) {
      reply.header('x-amz-object-lock-mode', v.mode);
      reply.header('x-amz-object-lock-retain-until-date', v.retainUntil.toISOString());
    }
    if (v.legalHold) reply.header('x-amz-object-lock-legal-hold', 'ON');
  };

  app.addHook('onRequest', async (request, reply) => {
    const url = new URL(request.url, 'http://s3');
    const match = /^\/([^/]+)\/?(.*)$/.exec(url.pathname);
    if (!match) return;
    const bucket = match[1];
    const key = decodeURIComponent(match[2]);
    const query = url.searchParams;
    const method = request.method;
    if (!store.buckets.has(bucket)) return; // fauxqs says NoSuchBucket

    if (key === '') {
      if (
        method === 'GET' &&
        (query.has('versioning') || query.has('versions')) &&
        states.get(bucket)?.denyVersionReads
      ) {
        return errorReply(reply, 403, 'AccessDenied', 'Access Denied');
      }
      if (query.has('versioning')) {
        if (method === 'GET') {
          const status = states.get(bucket)?.versioning;
          return xmlReply(
            reply,
            200,
            `<VersioningConfiguration ${NS}>${status ? `<Status>${status}</Status>` : ''}</VersioningConfiguration>`,
          );
        }
        if (method === 'PUT') {
          const status = /<Status>\s*(Enabled|Suspended)\s*<\/Status>/.exec(await bodyOf(request))?.[1];
          if (!status) return errorReply(reply, 400, 'MalformedXML', 'The XML you provided was not well-formed');
          if (status === 'Suspended' && states.get(bucket)?.lock) {
            return errorReply(
              reply,
              409,
              'InvalidBucketState',
              'An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.',
            );
          }
          setVersioning(bucket, status as 'Enabled' | 'Suspended');
          return reply.status(200).send('');
        }
      }
      if (query.has('object-lock')) {
        const lock = states.get(bucket)?.lock;
        if (method === 'GET') {
          if (!lock) {
            return errorReply(
              reply,
              404,
              'ObjectLockConfigurationNotFoundError',
              'Object Lock configuration does not exist for this bucket',
            );
          }
          const rule = lock.mode
            ? `<Rule><DefaultRetention><Mode>${lock.mode}</Mode>${lock.days ? `<Days>${lock.days}</Days>` : ''}${lock.years ? `<Years>${lock.years}</Years>` : ''}</DefaultRetention></Rule>`
            : '';
          return xmlReply(
            reply,
            200,
            `<ObjectLockConfiguration ${NS}><ObjectLockEnabled>Enabled</ObjectLockEnabled>${rule}</ObjectLockConfiguration>`,
          );
        }
        if (method === 'PUT') {
          if (!lock) {
            return errorReply(
              reply,
              409,
              'InvalidBucketState',
              'Object Lock configuration cannot be enabled on existing buckets',
            );
          }
          const body = await bodyOf(request);
          const mode = /<Mode>(COMPLIANCE|GOVERNANCE)<\/Mode>/.exec(body)?.[1] as LockMode | undefined;
          const days = Number(/<Days>(\d+)<\/Days>/.exec(body)?.[1] ?? 0) || undefined;
          const years = Number(/<Years>(\d+)<\/Years>/.exec(body)?.[1] ?? 0) || undefined;
          states.set(bucket, { ...states.get(bucket), lock: mode ? { mode, days, years } : {} });
          return reply.status(200).send('');
        }
      }
      if (method === 'GET' && query.has('versions')) return listVersions(reply, bucket, query);
      if (method === 'POST' && query.has('delete') && versioned(bucket)) {
        return errorReply(reply, 501, 'NotImplemented', 'DeleteObjects is not implemented for versioned buckets here');
      }
      return;
    }

    if (!versioned(bucket)) return;
    const versionId = query.get('versionId');
    if ((method === 'GET' || method === 'HEAD') && versionId !== null) {
      const version = versionsIn(bucket)
        .get(key)
        ?.find((v) => v.id === versionId);
      if (!version) return errorReply(reply, 404, 'NoSuchVersion', 'The specified version does not exist.');
      if (version.marker) {
        reply.header('x-amz-delete-marker', 'true').header('x-amz-version-id', version.id);
        return errorReply(reply, 405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
      }
      return serveVersion(request, reply, version, method === 'HEAD');
    }
    if (method === 'DELETE' && !query.has('uploadId')) {
      const list = versionsIn(bucket).get(key) ?? [];
      if (versionId === null) {
        const marker = addVersion(bucket, key, { marker: true, lastModified: new Date() });
        materialize(bucket, key);
        return reply.status(204).header('x-amz-delete-marker', 'true').header('x-amz-version-id', marker.id).send();
      }
      const version = list.find((v) => v.id === versionId);
      if (!version) return reply.status(204).send();
      const bypass = String(request.headers['x-amz-bypass-governance-retention']).toLowerCase() === 'true';
      const retained = version.marker ? undefined : retainedBy(version, bypass);
      if (retained) {
        return errorReply(reply, 403, 'AccessDenied', 'Access Denied because object protected by object lock.');
      }
      versionsIn(bucket).set(
        key,
        list.filter((v) => v !== version),
      );
      materialize(bucket, key);
      reply.header('x-amz-version-id', version.id);
      if (version.marker) reply.header('x-amz-delete-marker', 'true');
      return reply.status(204).send();
    }
  });

  const captured = new WeakSet<IncomingMessage>();
  app.addHook('onSend', async (request, reply, payload) => {
    const url = new URL(request.url, 'http://s3');
    const match = /^\/([^/]+)\/?(.*)$/.exec(url.pathname);
    if (!match) return payload;
    const bucket = match[1];
    const key = decodeURIComponent(match[2]);
    const query = url.searchParams;
    const method = request.method;
    if (key === '') {
      // CreateBucket with object lock: versioning is on from the start and cannot be suspended
      if (
        method === 'PUT' &&
        reply.statusCode === 200 &&
        headerIs(request, 'x-amz-bucket-object-lock-enabled', 'true')
      ) {
        setVersioning(bucket, 'Enabled');
        states.set(bucket, { ...states.get(bucket), lock: states.get(bucket)?.lock ?? {} });
      }
      return payload;
    }
    if (!versioned(bucket) || reply.raw.headersSent) return payload;
    const written =
      reply.statusCode === 200 &&
      ((method === 'PUT' && !query.has('partNumber') && !query.has('uploadId')) ||
        (method === 'POST' && query.has('uploadId')));
    // fauxqs's PUT runs the onSend hooks twice; the version is taken once
    if (written && !captured.has(request.raw)) {
      captured.add(request.raw);
      const object = store.buckets.get(bucket)?.get(key);
      if (!object) return payload;
      const mode = request.headers['x-amz-object-lock-mode'] as LockMode | undefined;
      const until = request.headers['x-amz-object-lock-retain-until-date'];
      const version = addVersion(bucket, key, {
        marker: false,
        object,
        lastModified: object.lastModified,
        ...(mode && typeof until === 'string' ? { mode, retainUntil: new Date(until) } : defaultRetention(bucket)),
        legalHold: headerIs(request, 'x-amz-object-lock-legal-hold', 'ON'),
      });
      reply.header('x-amz-version-id', version.id);
      return payload;
    }
    if ((method === 'GET' || method === 'HEAD') && !query.has('versionId')) {
      const latest = versionsIn(bucket).get(key)?.at(-1);
      if (!latest) return payload;
      reply.header('x-amz-version-id', latest.id);
      if (latest.marker && reply.statusCode === 404) reply.header('x-amz-delete-marker', 'true');
      if (!latest.marker && reply.statusCode < 300) lockHeaders(reply, latest);
    }
    return payload;
  });

  function serveVersion(request: HookRequest, reply: HookReply, version: Version, head: boolean) {
    const object = version.object!;
    reply
      .header('content-type', object.contentType)
      .header('etag', object.etag)
      .header('last-modified', version.lastModified.toUTCString())
      .header('x-amz-version-id', version.id)
      .header('accept-ranges', 'bytes');
    for (const [name, value] of Object.entries(object.metadata)) reply.header(`x-amz-meta-${name}`, value);
    lockHeaders(reply, version);
    const total = object.body.length;
    const range = /^bytes=(\d+)-(\d*)$/.exec(String(request.headers.range ?? ''));
    if (range && !head) {
      const start = Number(range[1]);
      const end = Math.min(range[2] ? Number(range[2]) : total - 1, total - 1);
      if (start >= total) {
        reply.header('content-range', `bytes */${total}`);
        return errorReply(reply, 416, 'InvalidRange', 'The requested range is not satisfiable');
      }
      return reply
        .status(206)
        .header('content-range', `bytes ${start}-${end}/${total}`)
        .header('content-length', end - start + 1)
        .send(object.body.subarray(start, end + 1));
    }
    reply.header('content-length', total);
    return reply.status(200).send(head ? undefined : object.body);
  }

  function listVersions(reply: HookReply, bucket: string, query: URLSearchParams) {
    const prefix = query.get('prefix') ?? '';
    const keyMarker = query.get('key-marker') ?? '';
    const versionIdMarker = query.get('version-id-marker') ?? '';
    const maxKeys = Math.min(Number(query.get('max-keys') ?? 1000) || 1000, options.pageSize ?? 1000);
    if (!versioned(bucket)) takeNullVersions(bucket); // a bucket never versioned lists its objects as `null` versions
    const keys = [...versionsIn(bucket).keys()].filter((k) => k.startsWith(prefix)).sort(byteOrder);
    const all = keys.flatMap((k) =>
      [...versionsIn(bucket).get(k)!].reverse().map((v, i) => ({ key: k, version: v, latest: i === 0 })),
    );
    let start = 0;
    if (keyMarker) {
      const at = versionIdMarker
        ? all.findIndex((e) => e.key === keyMarker && e.version.id === versionIdMarker)
        : all.findLastIndex((e) => e.key === keyMarker);
      start = at >= 0 ? at + 1 : all.findIndex((e) => e.key > keyMarker);
      if (start < 0) start = all.length;
    }
    const page = all.slice(start, start + maxKeys);
    const truncated = start + maxKeys < all.length;
    const items = page
      .map(({ key, version, latest }) =>
        version.marker
          ? `<DeleteMarker><Key>${xml(key)}</Key><VersionId>${version.id}</VersionId><IsLatest>${latest}</IsLatest><LastModified>${version.lastModified.toISOString()}</LastModified></DeleteMarker>`
          : `<Version><Key>${xml(key)}</Key><VersionId>${version.id}</VersionId><IsLatest>${latest}</IsLatest><LastModified>${version.lastModified.toISOString()}</LastModified><ETag>${xml(version.object!.etag)}</ETag><Size>${version.object!.contentLength}</Size><StorageClass>STANDARD</StorageClass></Version>`,
      )
      .join('');
    const last = page.at(-1);
    return xmlReply(
      reply,
      200,
      `<ListVersionsResult ${NS}><Name>${xml(bucket)}</Name><Prefix>${xml(prefix)}</Prefix>` +
        `<KeyMarker>${xml(keyMarker)}</KeyMarker><VersionIdMarker>${xml(versionIdMarker)}</VersionIdMarker>` +
        `<MaxKeys>${maxKeys}</MaxKeys><IsTruncated>${truncated}</IsTruncated>` +
        (truncated && last
          ? `<NextKeyMarker>${xml(last.key)}</NextKeyMarker><NextVersionIdMarker>${last.version.id}</NextVersionIdMarker>`
          : '') +
        `${items}</ListVersionsResult>`,
    );
  }

  return {
    configureBucket(bucket, config) {
      if (config.versioning) setVersioning(bucket, config.versioning);
      if (config.denyVersionReads !== undefined) {
        states.set(bucket, { ...states.get(bucket), denyVersionReads: config.denyVersionReads });
      }
      if (config.objectLock) {
        setVersioning(bucket, 'Enabled');
        states.set(bucket, { ...states.get(bucket), lock: config.objectLock });
      }
    },
    versionsOf(bucket, key) {
      return [...(versionsIn(bucket).get(key) ?? [])]
        .reverse()
        .map((v) => ({ versionId: v.id, deleteMarker: v.marker, size: v.object?.contentLength ?? 0 }));
    },
  };
}

function byteOrder(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}

function headerIs(request: HookRequest, name: string, value: string): boolean {
  return String(request.headers[name] ?? '').toLowerCase() === value.toLowerCase();
}

async function bodyOf(request: HookRequest): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request.raw) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function xmlReply(reply: HookReply, status: number, body: string): HookReply {
  return reply
    .status(status)
    .header('content-type', 'application/xml')
    .send(`<?xml version="1.0" encoding="UTF-8"?>${body}`);
}

function errorReply(reply: HookReply, status: number, code: string, message: string): HookReply {
  return xmlReply(reply, status, `<Error><Code>${code}</Code><Message>${xml(message)}</Message></Error>`);
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
