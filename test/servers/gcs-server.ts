/**
 * A small GCS JSON-API server, faithful enough for the real `@google-cloud/storage` client: buckets, simple
 * (media and multipart) and resumable uploads (one streamed request or many chunks, status queries, cancel),
 * downloads with ranges and `x-goog-hash`, object metadata, listings with prefix/delimiter/maxResults/pageToken,
 * delete (refused with GCS's 403 `retentionPolicyNotMet`, for every generation of a name a test put under retention).
 * No emulator installs here (firebase's needs Java and a download), hence this one.
 *
 * Object versioning, so that tests play an attacker on a versioned bucket (`configureBucket(b, { versioning: true })`):
 * an upload over a live object or a DELETE without `generation` leaves the live generation noncurrent (stored, with
 * `timeDeleted`); `generation=N` reads (metadata and media) or permanently deletes that one generation, live or
 * noncurrent; a listing with `versions=true` shows noncurrent generations too, by name, then oldest generation
 * first. Without `generation` only the live generation is served. An unversioned bucket deletes the live generation
 * on overwrite or delete; noncurrent ones it kept while versioned stay, as in GCS.
 *
 * Object bodies live in files, so a 1 GB benchmark upload costs disk, not memory. Paths are accepted with
 * and without the `/storage/v1` prefix: with STORAGE_EMULATOR_HOST the client leaves it out.
 */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rename, rm, stat, truncate } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Crc32c } from './crc32c.ts';
import { closeServer, listenOnLoopback, type TestServer } from './test-server.ts';

export interface GcsTestServer extends TestServer {
  createBucket(name: string): void;
  /**
   * Resumable uploads holding data that were neither finished nor cancelled. (A session whose creation was
   * answered into the void holds none: GCS lets it expire.)
   */
  openSessions(): number;
  /** Puts an object under retention until `until` (as a bucket retention policy or object retention would). */
  retainObject(bucket: string, name: string, until: Date): void;
  /** What the bucket's resource says of object versioning and its retention policy (as GCS's JSON API shows them). */
  configureBucket(bucket: string, config: GcsBucketConfig): void;
}

export interface GcsBucketConfig {
  versioning?: boolean;
  retentionPolicy?: { retentionPeriodSeconds: number; isLocked?: boolean };
}

interface StoredObject {
  bucket: string;
  name: string;
  file: string;
  size: number;
  generation: number;
  crc32c: string;
  md5: string;
  contentType: string;
  metadata: Record<string, string>;
  updated: Date;
  /** When it became noncurrent; unset while it is the live generation. */
  timeDeleted?: Date;
}

/** Where a listing page ended: after one generation of a name, or after every name under a common prefix. */
type Cursor = { name: string; generation: number } | { prefix: string };

interface Session {
  id: string;
  bucket: string;
  name: string;
  contentType: string;
  metadata: Record<string, string>;
  file: string;
  received: number;
  crc: Crc32c;
  md5: ReturnType<typeof createHash>;
  done?: StoredObject;
}

// No parameter properties here: the benchmark loads this file with Node's type stripping.
class HttpError extends Error {
  readonly status: number;
  readonly reason: string;

  constructor(status: number, message: string, reason = 'invalid') {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export async function startGcsServer(): Promise<GcsTestServer> {
  const dir = await mkdtemp(join(tmpdir(), 'gcs-server-'));
  const buckets = new Set<string>();
  // `${bucket}/${name}` → its generations, oldest first; only the newest can be live (it has no timeDeleted).
  const generations = new Map<string, StoredObject[]>();
  const sessions = new Map<string, Session>();
  const retention = new Map<string, Date>(); // `${bucket}/${name}`
  const bucketConfigs = new Map<string, GcsBucketConfig>();
  let generation = Date.now() * 1000;
  let nextFile = 0;
  const newFile = () => join(dir, `${nextFile++}.bin`);

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const e = err instanceof HttpError ? err : new HttpError(500, String(err), 'backendError');
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendJson(res, e.status, {
        error: { code: e.status, message: e.message, errors: [{ reason: e.reason, message: e.message }] },
      });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://gcs');
    const path = url.pathname.replace(/^\/(upload|download)?\/?storage\/v1(?=\/)/, (_m, kind: string | undefined) =>
      kind === 'upload' ? '/upload' : '',
    );
    const method = req.method ?? 'GET';

    if (path === '/upload/b' || path.startsWith('/upload/b/')) return upload(req, res, url, path);
    if (path === '/b' && method === 'POST') {
      const body = JSON.parse((await readAll(req)).toString() || '{}') as { name?: string };
      if (!body.name) throw new HttpError(400, 'bucket name required');
      buckets.add(body.name);
      return sendJson(res, 200, bucketResource(body.name));
    }
    const bucketMatch = /^\/b\/([^/]+)(\/o(?:\/(.+))?)?$/.exec(path);
    if (!bucketMatch) throw new HttpError(404, `no route for ${method} ${url.pathname}`, 'notFound');
    const bucket = decodeURIComponent(bucketMatch[1]);
    if (!buckets.has(bucket)) throw new HttpError(404, 'The specified bucket does not exist.', 'notFound');
    if (!bucketMatch[2]) {
      if (method === 'GET') return sendJson(res, 200, bucketResource(bucket, bucketConfigs.get(bucket)));
      throw new HttpError(405, `${method} on a bucket is not supported here`);
    }
    if (bucketMatch[3] === undefined) {
      if (method === 'GET') return list(res, bucket, url.searchParams);
      throw new HttpError(405, `${method} on an object listing is not supported here`);
    }
    const name = decodeURIComponent(bucketMatch[3]);
    const wanted = url.searchParams.get('generation');
    if (wanted !== null && !/^\d+$/.test(wanted)) throw new HttpError(400, `Invalid argument: generation ${wanted}`);
    const object =
      wanted === null
        ? live(`${bucket}/${name}`)
        : generations.get(`${bucket}/${name}`)?.find((o) => o.generation === Number(wanted));
    if (!object) throw new HttpError(404, `No such object: ${bucket}/${name}`, 'notFound');
    const retainedUntil = retention.get(`${bucket}/${name}`);
    if (method === 'DELETE' && retainedUntil && retainedUntil.getTime() > Date.now()) {
      throw new HttpError(
        403,
        `Object '${bucket}/${name}' is subject to bucket's retention policy or object retention and cannot be deleted or overwritten until ${retainedUntil.toISOString()}`,
        'retentionPolicyNotMet',
      );
    }
    if (method === 'DELETE') {
      await (wanted === null ? retire(object) : remove(object));
      res.writeHead(204).end();
      return;
    }
    if (method === 'GET' && url.searchParams.get('alt') === 'media') return download(req, res, object);
    if (method === 'GET') return sendJson(res, 200, objectResource(object));
    throw new HttpError(405, `${method} on an object is not supported here`);
  }

  function list(res: ServerResponse, bucket: string, query: URLSearchParams): void {
    const prefix = query.get('prefix') ?? '';
    const delimiter = query.get('delimiter') ?? '';
    const maxResults = Math.min(Number(query.get('maxResults') ?? 1000) || 1000, 1000);
    const versions = query.get('versions') === 'true';
    const token = query.get('pageToken');
    const after = token ? (JSON.parse(Buffer.from(token, 'base64url').toString()) as Cursor) : undefined;
    const entries = [...generations.values()]
      .flat()
      .filter((o) => o.bucket === bucket && o.name.startsWith(prefix) && (versions || !o.timeDeleted))
      .filter((o) => !after || comesAfter(o, after))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.generation - b.generation));
    const items: StoredObject[] = [];
    const prefixes = new Set<string>();
    let last: Cursor | undefined;
    let truncated = false;
    for (const object of entries) {
      if (items.length + prefixes.size >= maxResults) {
        truncated = true;
        break;
      }
      const rest = object.name.slice(prefix.length);
      const cut = delimiter ? rest.indexOf(delimiter) : -1;
      if (cut >= 0) {
        last = { prefix: prefix + rest.slice(0, cut + delimiter.length) };
        prefixes.add(last.prefix);
      } else {
        items.push(object);
        last = { name: object.name, generation: object.generation };
      }
    }
    sendJson(res, 200, {
      kind: 'storage#objects',
      items: items.map(objectResource),
      ...(prefixes.size > 0 && { prefixes: [...prefixes] }),
      ...(truncated && { nextPageToken: Buffer.from(JSON.stringify(last)).toString('base64url') }),
    });
  }

  function download(req: IncomingMessage, res: ServerResponse, object: StoredObject): void {
    const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
    let start = 0;
    let end = object.size - 1;
    if (range) {
      start = range[1] ? Number(range[1]) : Math.max(0, object.size - Number(range[2]));
      end = range[1] && range[2] ? Math.min(Number(range[2]), object.size - 1) : object.size - 1;
      if (start >= object.size && object.size > 0) {
        res.writeHead(416, { 'content-range': `bytes */${object.size}` }).end();
        return;
      }
    }
    const headers: Record<string, string | number> = {
      'content-type': object.contentType,
      'content-length': Math.max(0, end - start + 1),
      'x-goog-hash': `crc32c=${object.crc32c},md5=${object.md5}`,
      'x-goog-generation': object.generation,
      'x-goog-stored-content-length': object.size,
      'accept-ranges': 'bytes',
    };
    if (range) headers['content-range'] = `bytes ${start}-${end}/${object.size}`;
    res.writeHead(range ? 206 : 200, headers);
    if (object.size === 0 || end < start) {
      res.end();
      return;
    }
    const body = createReadStream(object.file, { start, end });
    body.on('error', () => res.destroy());
    body.pipe(res);
  }

  async function upload(req: IncomingMessage, res: ServerResponse, url: URL, path: string): Promise<void> {
    const bucket = decodeURIComponent(/^\/upload\/b\/([^/]+)\/o$/.exec(path)?.[1] ?? '');
    if (!buckets.has(bucket)) throw new HttpError(404, 'The specified bucket does not exist.', 'notFound');
    const type = url.searchParams.get('uploadType');
    const uploadId = url.searchParams.get('upload_id');
    if (type === 'resumable' && uploadId) return resumableChunk(req, res, uploadId);
    if (type === 'resumable') {
      const resource = JSON.parse((await readAll(req)).toString() || '{}') as ObjectInit;
      const id = randomBytes(12).toString('hex');
      const name = url.searchParams.get('name') ?? resource.name;
      if (!name) throw new HttpError(400, 'object name required');
      sessions.set(id, { id, bucket, name, ...describe(resource), file: newFile(), received: 0, ...hashes() });
      const location = `http://${req.headers.host}/upload/storage/v1/b/${encodeURIComponent(bucket)}/o?uploadType=resumable&upload_id=${id}`;
      res.writeHead(200, { location, 'content-length': 0 }).end();
      return;
    }
    if (type === 'media' || type === 'multipart') {
      const body = await readAll(req);
      let resource: ObjectInit = {};
      let data = body;
      if (type === 'multipart') [resource, data] = parseMultipart(req, body);
      const name = url.searchParams.get('name') ?? resource.name;
      if (!name) throw new HttpError(400, 'object name required');
      const session: Session = {
        id: '',
        bucket,
        name,
        ...describe(resource),
        file: newFile(),
        received: 0,
        ...hashes(),
      };
      await appendTo(session, [data]);
      return sendJson(res, 200, objectResource(await finish(session)));
    }
    throw new HttpError(400, `uploadType ${type} is not supported here`);
  }

  async function resumableChunk(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const session = sessions.get(id);
    if (!session) throw new HttpError(404, 'No such upload session', 'notFound');
    if (req.method === 'DELETE') {
      sessions.delete(id);
      await rm(session.file, { force: true });
      req.resume();
      res.writeHead(499).end();
      return;
    }
    if (session.done) {
      req.resume();
      return sendJson(res, 200, objectResource(session.done));
    }
    // `bytes */*` or `bytes */TOTAL` asks for status (or finishes at TOTAL); `bytes S-E/TOTAL|*` and
    // `bytes S-*/TOTAL|*` carry data. An open end (`-*`) means the object ends with this request.
    // The client sends `bytes 0--1/0` to finish an empty object.
    const range = /^bytes (?:(\d+)-(-1|\d+|\*)|\*)\/(\d+|\*)$/.exec(req.headers['content-range'] ?? 'bytes */*');
    if (!range) throw new HttpError(400, `bad Content-Range ${req.headers['content-range']}`);
    const total = range[3] === '*' ? undefined : Number(range[3]);
    if (range[1] !== undefined) {
      const start = Number(range[1]);
      if (start > session.received)
        throw new HttpError(400, `chunk starts at ${start}, server has ${session.received}`);
      await appendTo(session, req, session.received - start);
    } else {
      await readAll(req);
    }
    const ends = total === undefined ? range[1] !== undefined && range[2] === '*' : session.received >= total;
    if (total !== undefined && session.received > total) throw new HttpError(400, 'more data than the declared size');
    if (!ends) {
      const headers: Record<string, string | number> = { 'content-length': 0 };
      if (session.received > 0) headers.range = `bytes=0-${session.received - 1}`;
      res.writeHead(308, headers).end();
      return;
    }
    const claimed = /crc32c=([^,]+)/.exec(String(req.headers['x-goog-hash'] ?? ''))?.[1];
    if (claimed && claimed !== session.crc.base64()) {
      throw new HttpError(400, `crc32c mismatch: client ${claimed}, server ${session.crc.base64()}`);
    }
    session.done = await finish(session);
    sendJson(res, 200, objectResource(session.done));
  }

  /** Appends a body, skipping `skip` bytes the server already has; a body cut off midway is not kept. */
  async function appendTo(session: Session, body: AsyncIterable<Buffer> | Buffer[], skip = 0): Promise<void> {
    const before = session.received;
    const out = createWriteStream(session.file, { flags: 'a' });
    // Hashes advance only once the whole body has arrived.
    const crc = session.crc.copy();
    const md5 = session.md5.copy();
    let received = before;
    try {
      for await (const chunk of body) {
        let data = chunk;
        if (skip > 0) {
          const n = Math.min(skip, data.length);
          data = data.subarray(n);
          skip -= n;
        }
        if (data.length === 0) continue;
        crc.update(data);
        md5.update(data);
        received += data.length;
        if (!out.write(data)) await once(out, 'drain');
      }
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    } catch (err) {
      out.destroy();
      await truncate(session.file, before).catch(() => {});
      throw err;
    }
    session.received = received;
    session.crc = crc;
    session.md5 = md5;
  }

  async function finish(session: Session): Promise<StoredObject> {
    const file = newFile();
    const size = await stat(session.file).then(
      (s) => s.size,
      () => 0,
    );
    if (size > 0) await rename(session.file, file);
    const key = `${session.bucket}/${session.name}`;
    const previous = live(key);
    const object: StoredObject = {
      bucket: session.bucket,
      name: session.name,
      file,
      size,
      generation: ++generation,
      crc32c: session.crc.base64(),
      md5: session.md5.digest('base64'),
      contentType: session.contentType,
      metadata: session.metadata,
      updated: new Date(),
    };
    generations.set(key, [...(generations.get(key) ?? []), object]);
    if (session.id) sessions.delete(session.id);
    if (previous) await retire(previous);
    return object;
  }

  /** The generation served when a request names none: the newest, unless it is noncurrent. */
  function live(key: string): StoredObject | undefined {
    const newest = generations.get(key)?.at(-1);
    return newest?.timeDeleted ? undefined : newest;
  }

  /** A live generation overwritten or deleted: a versioned bucket keeps it as noncurrent, others delete it. */
  async function retire(object: StoredObject): Promise<void> {
    if (bucketConfigs.get(object.bucket)?.versioning) object.timeDeleted = new Date();
    else await remove(object);
  }

  async function remove(object: StoredObject): Promise<void> {
    const key = `${object.bucket}/${object.name}`;
    const rest = (generations.get(key) ?? []).filter((o) => o !== object);
    if (rest.length > 0) generations.set(key, rest);
    else generations.delete(key);
    await rm(object.file, { force: true });
  }

  const endpoint = await listenOnLoopback(server);
  return {
    endpoint,
    createBucket: (name) => buckets.add(name),
    openSessions: () => [...sessions.values()].filter((s) => !s.done && s.received > 0).length,
    retainObject: (bucket, name, until) => retention.set(`${bucket}/${name}`, until),
    configureBucket: (bucket, config) => bucketConfigs.set(bucket, config),
    stop: async () => {
      await closeServer(server);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

interface ObjectInit {
  name?: string;
  contentType?: string;
  metadata?: Record<string, string>;
}

function describe(resource: ObjectInit): { contentType: string; metadata: Record<string, string> } {
  return { contentType: resource.contentType ?? 'application/octet-stream', metadata: resource.metadata ?? {} };
}

function hashes(): { crc: Crc32c; md5: ReturnType<typeof createHash> } {
  return { crc: new Crc32c(), md5: createHash('md5') };
}

function bucketResource(name: string, config: GcsBucketConfig = {}) {
  const policy = config.retentionPolicy;
  return {
    kind: 'storage#bucket',
    id: name,
    name,
    location: 'US',
    storageClass: 'STANDARD',
    ...(config.versioning !== undefined ? { versioning: { enabled: config.versioning } } : {}),
    ...(policy
      ? {
          retentionPolicy: {
            retentionPeriod: String(policy.retentionPeriodSeconds),
            effectiveTime: new Date(0).toISOString(),
            ...(policy.isLocked ? { isLocked: true } : {}),
          },
        }
      : {}),
  };
}

function objectResource(o: StoredObject) {
  return {
    kind: 'storage#object',
    id: `${o.bucket}/${o.name}/${o.generation}`,
    name: o.name,
    bucket: o.bucket,
    generation: String(o.generation),
    metageneration: '1',
    contentType: o.contentType,
    size: String(o.size),
    md5Hash: o.md5,
    crc32c: o.crc32c,
    etag: o.md5,
    timeCreated: o.updated.toISOString(),
    updated: o.updated.toISOString(),
    storageClass: 'STANDARD',
    ...(o.timeDeleted && { timeDeleted: o.timeDeleted.toISOString() }),
    ...(Object.keys(o.metadata).length > 0 && { metadata: o.metadata }),
  };
}

function comesAfter(o: StoredObject, cursor: Cursor): boolean {
  if ('prefix' in cursor) return o.name > cursor.prefix && !o.name.startsWith(cursor.prefix);
  return o.name > cursor.name || (o.name === cursor.name && o.generation > cursor.generation);
}

/** `multipart/related`: a JSON resource part, then the media part. */
function parseMultipart(req: IncomingMessage, body: Buffer): [ObjectInit, Buffer] {
  const boundary = /boundary="?([^";]+)"?/.exec(req.headers['content-type'] ?? '')?.[1];
  if (!boundary) throw new HttpError(400, 'multipart upload without boundary');
  const parts: Buffer[] = [];
  const delimiter = Buffer.from(`--${boundary}`);
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const next = body.indexOf(delimiter, at + delimiter.length);
    if (next < 0) break;
    const part = body.subarray(at + delimiter.length, next);
    const headerEnd = part.indexOf('\r\n\r\n');
    parts.push(part.subarray(headerEnd + 4, part.length - 2)); // drop the CRLF before the next delimiter
    at = next;
  }
  if (parts.length < 2) throw new HttpError(400, 'multipart upload needs a resource and a media part');
  return [JSON.parse(parts[0].toString()) as ObjectInit, parts[1]];
}

async function readAll(req: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
