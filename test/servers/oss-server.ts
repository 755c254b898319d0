/**
 * A small Alibaba Cloud OSS server on 127.0.0.1, faithful to the protocol the real `ali-oss` SDK speaks (no OSS
 * emulator installs here): the bucket in the Host header (the SDK sends `Host: <bucket>.oss-<region>.aliyuncs.com` to an
 * IP endpoint) or in the path, every request's
 * signature checked (OSS's V1 HMAC-SHA1 over the verb, Content-MD5, Content-Type, the date, the x-oss-* headers and
 * the resource with its sub-resources), objects with x-oss-meta-* metadata and ranges, v1 listings with prefix,
 * marker and max-keys, multipart uploads (initiate, parts, complete with the parts' ETags, abort), and OSS's XML
 * errors. Objects are kept in memory.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listenOnLoopback, type TestServer } from './test-server.ts';

export interface OssTestServer extends TestServer {
  accessKeyId: string;
  accessKeySecret: string;
  createBucket(name: string): void;
  /** Multipart uploads begun and neither completed nor aborted. */
  pendingUploads(bucket: string): { key: string; uploadId: string; parts: number }[];
  /** Requests refused for a bad signature or an unknown key. */
  readonly refused: number;
}

interface StoredObject {
  data: Buffer;
  meta: Record<string, string>;
  etag: string;
  modified: Date;
  contentType: string;
}

interface Upload {
  key: string;
  meta: Record<string, string>;
  contentType: string;
  parts: Map<number, { data: Buffer; etag: string }>;
  initiated: Date;
}

/** Query names that are part of the signed resource (OSS's sub-resources); the others (prefix, marker) are not. */
const SUBRESOURCES = new Set([
  'acl',
  'uploads',
  'location',
  'delete',
  'uploadId',
  'partNumber',
  'bucketInfo',
  'append',
  'position',
  'tagging',
  'symlink',
  'objectMeta',
  'restore',
  'stat',
]);
const CLOCK_SKEW_MS = 15 * 60_000;
const OWNER = '1234567890123456';

class OssError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function startOssServer(): Promise<OssTestServer> {
  const accessKeyId = `LTAI${randomBytes(8).toString('hex')}`;
  const accessKeySecret = randomBytes(15).toString('base64');
  const buckets = new Map<string, Map<string, StoredObject>>();
  const uploads = new Map<string, Map<string, Upload>>();
  let refused = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => res.destroy());
    req.on('end', () => {
      try {
        handle(req, res, Buffer.concat(chunks));
      } catch (err) {
        const e = err instanceof OssError ? err : new OssError(500, 'InternalError', String(err));
        if (e.code === 'SignatureDoesNotMatch' || e.code === 'InvalidAccessKeyId') refused++;
        const body =
          `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${e.code}</Code><Message>${xmlText(e.message)}</Message>` +
          `<RequestId>${requestId()}</RequestId><HostId>127.0.0.1</HostId></Error>`;
        send(res, e.status, body, { 'content-type': 'application/xml' });
      }
    });
  });

  function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // Virtual-hosted (the bucket is the Host's first label, as the SDK sends it to an IP endpoint) or path style.
    const host = String(req.headers.host ?? '');
    const virtual = /^([a-z0-9][a-z0-9-]{1,61}[a-z0-9])\.(?!\d+\.\d+\.\d+(:\d+)?$)/.exec(host)?.[1];
    const [, first = '', ...rest] = url.pathname.split('/');
    const bucket = virtual ?? decodeURIComponent(first);
    const key = decodeURIComponent((virtual ? [first, ...rest] : rest).join('/'));
    checkSignature(req, url, bucket, key);
    const objects = buckets.get(bucket);
    if (!objects) throw new OssError(404, 'NoSuchBucket', `The specified bucket does not exist: ${bucket}`);
    const q = url.searchParams;
    const method = req.method ?? 'GET';
    if (!key) {
      if (method === 'GET' && q.has('uploads')) return listUploads(res, bucket);
      if (method === 'GET') return listObjects(res, bucket, objects, q);
      throw new OssError(405, 'MethodNotAllowed', `${method} on a bucket is not served here`);
    }
    if (method === 'POST' && q.has('uploads')) {
      const uploadId = randomBytes(16).toString('hex').toUpperCase();
      uploadsOf(bucket).set(uploadId, {
        key,
        meta: metaOf(req),
        contentType: String(req.headers['content-type'] ?? 'application/octet-stream'),
        parts: new Map(),
        initiated: new Date(),
      });
      return send(
        res,
        200,
        `<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${xmlText(key)}</Key><UploadId>${uploadId}</UploadId></InitiateMultipartUploadResult>`,
        { 'content-type': 'application/xml' },
      );
    }
    if (q.has('uploadId')) return multipart(req, res, bucket, key, q, body);
    if (method === 'PUT') {
      checkMd5(req, body);
      const etag = md5Hex(body);
      objects.set(key, {
        data: body,
        meta: metaOf(req),
        etag,
        modified: new Date(),
        contentType: String(req.headers['content-type'] ?? 'application/octet-stream'),
      });
      return send(res, 200, '', { etag: `"${etag.toUpperCase()}"` });
    }
    const object = objects.get(key);
    if (method === 'DELETE') {
      objects.delete(key);
      return send(res, 204, '');
    }
    if (!object) throw new OssError(404, 'NoSuchKey', 'The specified key does not exist.');
    const headers: Record<string, string> = {
      etag: `"${object.etag.toUpperCase()}"`,
      'last-modified': object.modified.toUTCString(),
      'content-type': object.contentType,
    };
    for (const [k, v] of Object.entries(object.meta)) headers[`x-oss-meta-${k}`] = v;
    if (method === 'HEAD')
      return send(res, 200, '', { ...headers, 'content-length': String(object.data.length) }, true);
    if (method !== 'GET') throw new OssError(405, 'MethodNotAllowed', `${method} on an object is not served here`);
    const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''));
    if (range) {
      const start = Number(range[1]);
      const end = range[2] ? Math.min(Number(range[2]), object.data.length - 1) : object.data.length - 1;
      if (start < object.data.length) {
        return send(res, 206, object.data.subarray(start, end + 1), {
          ...headers,
          'content-range': `bytes ${start}-${end}/${object.data.length}`,
        });
      }
    }
    return send(res, 200, object.data, headers);
  }

  function multipart(
    req: IncomingMessage,
    res: ServerResponse,
    bucket: string,
    key: string,
    q: URLSearchParams,
    body: Buffer,
  ): void {
    const uploadId = q.get('uploadId') ?? '';
    const upload = uploadsOf(bucket).get(uploadId);
    if (!upload || upload.key !== key) {
      throw new OssError(404, 'NoSuchUpload', 'The specified upload does not exist. The upload ID may be invalid.');
    }
    if (req.method === 'PUT') {
      const number = Number(q.get('partNumber'));
      if (!Number.isInteger(number) || number < 1 || number > 10_000) {
        throw new OssError(400, 'InvalidArgument', 'Part number must be an integer between 1 and 10000.');
      }
      checkMd5(req, body);
      const etag = md5Hex(body).toUpperCase();
      upload.parts.set(number, { data: body, etag });
      return send(res, 200, '', { etag: `"${etag}"` });
    }
    if (req.method === 'DELETE') {
      uploadsOf(bucket).delete(uploadId);
      return send(res, 204, '');
    }
    if (req.method !== 'POST') throw new OssError(405, 'MethodNotAllowed', `${req.method} on an upload`);
    const listed = [...body.toString().matchAll(/<Part>\s*<PartNumber>(\d+)<\/PartNumber>\s*<ETag>([^<]*)<\/ETag>/g)];
    if (listed.length === 0) throw new OssError(400, 'MalformedXML', 'The XML you provided was not well-formed.');
    const pieces: Buffer[] = [];
    let previous = 0;
    for (const [index, [, n, etag]] of listed.entries()) {
      const number = Number(n);
      if (number <= previous)
        throw new OssError(400, 'InvalidPartOrder', 'The list of parts was not in ascending order.');
      previous = number;
      const part = upload.parts.get(number);
      if (!part || part.etag !== etag.replace(/&quot;|"/g, '').toUpperCase()) {
        throw new OssError(400, 'InvalidPart', `One or more of the specified parts could not be found: ${number}`);
      }
      if (index < listed.length - 1 && part.data.length < 100 * 1024) {
        throw new OssError(400, 'EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed size.');
      }
      pieces.push(part.data);
    }
    const data = Buffer.concat(pieces);
    const etag = `${md5Hex(Buffer.concat(listed.map(([, , e]) => Buffer.from(e.replace(/&quot;|"/g, ''), 'hex'))))}-${listed.length}`;
    buckets.get(bucket)!.set(key, {
      data,
      meta: upload.meta,
      etag,
      modified: new Date(),
      contentType: upload.contentType,
    });
    uploadsOf(bucket).delete(uploadId);
    return send(
      res,
      200,
      `<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${xmlText(key)}</Key><ETag>"${etag.toUpperCase()}"</ETag></CompleteMultipartUploadResult>`,
      { 'content-type': 'application/xml' },
    );
  }

  function listObjects(res: ServerResponse, bucket: string, objects: Map<string, StoredObject>, q: URLSearchParams) {
    const prefix = q.get('prefix') ?? '';
    const marker = q.get('marker') ?? '';
    const max = Math.min(Number(q.get('max-keys') ?? 100) || 100, 1000);
    const keys = [...objects.keys()].filter((k) => k.startsWith(prefix) && k > marker).sort();
    const page = keys.slice(0, max);
    const truncated = keys.length > max;
    const contents = page
      .map((k) => {
        const o = objects.get(k)!;
        return `<Contents><Key>${xmlText(k)}</Key><LastModified>${o.modified.toISOString()}</LastModified><ETag>"${o.etag.toUpperCase()}"</ETag><Type>Normal</Type><Size>${o.data.length}</Size><StorageClass>Standard</StorageClass><Owner><ID>${OWNER}</ID><DisplayName>${OWNER}</DisplayName></Owner></Contents>`;
      })
      .join('');
    send(
      res,
      200,
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>${bucket}</Name><Prefix>${xmlText(prefix)}</Prefix><Marker>${xmlText(marker)}</Marker><MaxKeys>${max}</MaxKeys><Delimiter></Delimiter><IsTruncated>${truncated}</IsTruncated>${truncated ? `<NextMarker>${xmlText(page[page.length - 1])}</NextMarker>` : ''}${contents}</ListBucketResult>`,
      { 'content-type': 'application/xml' },
    );
  }

  function listUploads(res: ServerResponse, bucket: string) {
    const items = [...uploadsOf(bucket).entries()]
      .map(
        ([id, u]) =>
          `<Upload><Key>${xmlText(u.key)}</Key><UploadId>${id}</UploadId><Initiated>${u.initiated.toISOString()}</Initiated></Upload>`,
      )
      .join('');
    send(
      res,
      200,
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>${bucket}</Bucket><IsTruncated>false</IsTruncated>${items}</ListMultipartUploadsResult>`,
      { 'content-type': 'application/xml' },
    );
  }

  /** OSS's V1 signature: `OSS <AccessKeyId>:<base64 HMAC-SHA1 of the string to sign>`. */
  function checkSignature(req: IncomingMessage, url: URL, bucket: string, key: string): void {
    const auth = /^OSS ([^:]+):(.+)$/.exec(String(req.headers.authorization ?? ''));
    if (!auth) throw new OssError(403, 'AccessDenied', 'Authorization header is missing or not an OSS signature.');
    if (auth[1] !== accessKeyId)
      throw new OssError(
        403,
        'InvalidAccessKeyId',
        'The OSS Access Key Id you provided does not exist in our records.',
      );
    const date = String(req.headers['x-oss-date'] ?? req.headers.date ?? '');
    if (Math.abs(Date.parse(date) - Date.now()) > CLOCK_SKEW_MS || Number.isNaN(Date.parse(date))) {
      throw new OssError(
        403,
        'RequestTimeTooSkewed',
        'The difference between the request time and the current time is too large.',
      );
    }
    const ossHeaders = Object.entries(req.headers)
      .filter(([name]) => name.startsWith('x-oss-'))
      .map(([name, value]) => `${name}:${String(value).trim()}`)
      .sort();
    const sub = [...url.searchParams.entries()]
      .filter(([name]) => SUBRESOURCES.has(name))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => (value === '' ? name : `${name}=${value}`));
    const resource = `/${bucket}/${key}${sub.length ? `?${sub.join('&')}` : ''}`;
    const toSign = [
      req.method ?? 'GET',
      String(req.headers['content-md5'] ?? ''),
      String(req.headers['content-type'] ?? ''),
      date,
      ...ossHeaders,
      resource,
    ].join('\n');
    const expected = createHmac('sha1', accessKeySecret).update(toSign).digest('base64');
    if (expected !== auth[2]) {
      throw new OssError(
        403,
        'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided.',
      );
    }
  }

  function uploadsOf(bucket: string): Map<string, Upload> {
    const map = uploads.get(bucket) ?? new Map<string, Upload>();
    uploads.set(bucket, map);
    return map;
  }

  const endpoint = await listenOnLoopback(server);
  return {
    endpoint,
    accessKeyId,
    accessKeySecret,
    get refused() {
      return refused;
    },
    createBucket: (name) => {
      if (!buckets.has(name)) buckets.set(name, new Map());
    },
    pendingUploads: (bucket) =>
      [...uploadsOf(bucket).entries()].map(([uploadId, u]) => ({ key: u.key, uploadId, parts: u.parts.size })),
    stop: () => closeServer(server),
  };
}

function metaOf(req: IncomingMessage): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith('x-oss-meta-')) meta[name.slice('x-oss-meta-'.length)] = String(value);
  }
  return meta;
}

function checkMd5(req: IncomingMessage, body: Buffer): void {
  const given = req.headers['content-md5'];
  if (given && given !== createHash('md5').update(body).digest('base64')) {
    throw new OssError(400, 'InvalidDigest', 'The Content-MD5 you specified is not valid.');
  }
}

function md5Hex(data: Buffer): string {
  return createHash('md5').update(data).digest('hex');
}

function requestId(): string {
  return randomBytes(12).toString('hex').toUpperCase();
}

function xmlText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  headers: Record<string, string> = {},
  headOnly = false,
): void {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(status, {
    'x-oss-request-id': requestId(),
    server: 'AliyunOSS',
    date: new Date().toUTCString(),
    ...(headOnly ? {} : { 'content-length': String(data.length) }),
    ...headers,
  });
  res.end(headOnly ? undefined : data);
}
