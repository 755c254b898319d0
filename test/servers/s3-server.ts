/**
 * fauxqs as an S3 server on 127.0.0.1. Its own start helper binds 0.0.0.0, so the app is built and bound
 * here. Two things real S3 has and fauxqs lacks are added in front of its routes:
 * - access key checks, so that tests can see what wrong credentials do (the signature is not verified);
 * - ListMultipartUploads, which `cleanupIncompleteUploads` needs;
 * - object lock as HEAD shows it (`x-amz-object-lock-*` headers), for objects a test locks: S3 itself keeps a
 *   locked version from deletion while an unversioned delete only hides it, which the store avoids by reading
 *   the lock first (s3-store.ts);
 * - bucket versioning and Object Lock (s3-versions.ts), for buckets a test configures or creates with object lock;
 * - numeric character references in a CompleteMultipartUpload (`&#34;`), as Go's SDK writes them;
 * - the SHA-256 checksum of a part S3 copies (s3-copy.ts), which a copy between two buckets proves itself by.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { addCopyChecksums } from './s3-copy.ts';
import { addVersioning, type BucketVersioning } from './s3-versions.ts';
import type { TestServer } from './test-server.ts';

export interface S3TestServer extends TestServer {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  createBucket(name: string): void;
  /** Multipart uploads not yet completed or aborted, as the server sees them. */
  pendingUploads(bucket: string): { key: string; uploadId: string; parts: number }[];
  /** Refuses the next `times` deletes of a key with 403 AccessDenied, as a bucket policy denying it would. */
  refuseDeletes(bucket: string, key: string, times: number): void;
  /** Puts an object under object lock: retained until a date (COMPLIANCE mode), or a legal hold. */
  lockObject(bucket: string, key: string, lock: Date | 'legal-hold'): void;
  /** Turns versioning or Object Lock (with a default retention) on for a bucket (s3-versions.ts). */
  configureBucket(bucket: string, config: BucketVersioning): void;
  /** GET requests of an object's bytes so far, by key (reads of the object, whole or a range). */
  gets(bucket: string): Map<string, number>;
  /** A key's versions, newest first, delete markers included. */
  versionsOf(bucket: string, key: string): { versionId: string; deleteMarker: boolean; size: number }[];
}

/** The server's credentials as a JSON file ebr's S3 provider (and ours) reads (AWS_APPLICATION_CREDENTIALS_JSON). */
export async function writeS3Credentials(
  path: string,
  server: Pick<S3TestServer, 'accessKeyId' | 'secretAccessKey' | 'region'>,
): Promise<void> {
  const { accessKeyId: accessKeyID, secretAccessKey, region } = server;
  await writeFile(path, JSON.stringify({ accessKeyID, secretAccessKey, region }));
}

export interface S3ServerOptions {
  /** Keep object bodies in files under this directory instead of memory (large benchmarks). */
  storageDir?: string;
  buckets?: string[];
  /** At most this many versions a ListObjectVersions page (S3: 1000), to test paging. */
  versionsPageSize?: number;
  /** false: a part copy answers no checksum, as servers that compute none (fauxqs itself) do. */
  copyChecksums?: boolean;
  /** false: a part copy (UploadPartCopy) is refused with 501 NotImplemented, as servers without it answer. */
  partCopies?: boolean;
}

// fauxqs exports only its app builder (and only to `import`); the stores it is built from are reached by path.
const fauxqsDist = (() => {
  const dirs = createRequire(import.meta.url).resolve.paths('fauxqs') ?? [];
  const found = dirs.map((d) => join(d, 'fauxqs', 'dist')).find((d) => existsSync(join(d, 'app.js')));
  if (!found) throw new Error('fauxqs is not installed: run pnpm install');
  return found;
})();
const internal = (path: string) => import(pathToFileURL(join(fauxqsDist, path)).href);

interface PendingUpload {
  uploadId: string;
  bucket: string;
  key: string;
  initiated: Date;
  parts: Map<number, unknown>;
}

export async function startS3Server(options: S3ServerOptions = {}): Promise<S3TestServer> {
  const [{ buildApp }, { S3Store }, { SqsStore }, { SnsStore }, { FileS3Persistence }] = await Promise.all([
    import('fauxqs'),
    internal('s3/s3Store.js'),
    internal('sqs/sqsStore.js'),
    internal('sns/snsStore.js'),
    internal('s3/fileS3Persistence.js'),
  ]);
  const s3Store = new S3Store();
  if (options.storageDir) s3Store.persistence = new FileS3Persistence(options.storageDir);
  const app = buildApp({ logger: false, stores: { s3Store, sqsStore: new SqsStore(), snsStore: new SnsStore() } });

  const accessKeyId = `AKTEST${randomBytes(6).toString('hex').toUpperCase()}`;
  const secretAccessKey = randomBytes(20).toString('base64');

  const refused = new Map<string, number>(); // `/${bucket}/${key}`: deletes still to refuse
  const gets = new Map<string, number>(); // `/${bucket}/${key}`: GET requests
  app.addHook('onRequest', async (request, reply) => {
    const auth = request.headers.authorization ?? '';
    const credential = /Credential=([^/]+)\//.exec(auth)?.[1];
    if (credential !== accessKeyId) {
      return reply
        .status(403)
        .header('content-type', 'application/xml')
        .send(s3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'));
    }
    const url = new URL(request.url, 'http://s3');
    if (request.method === 'GET') gets.set(url.pathname, (gets.get(url.pathname) ?? 0) + 1);
    const refusals = refused.get(url.pathname) ?? 0;
    if (request.method === 'DELETE' && refusals > 0) {
      refused.set(url.pathname, refusals - 1);
      return reply.status(403).header('content-type', 'application/xml').send(s3Error('AccessDenied', 'Access Denied'));
    }
    if (options.partCopies === false && request.headers['x-amz-copy-source'] && url.searchParams.has('uploadId')) {
      return reply
        .status(501)
        .header('content-type', 'application/xml')
        .send(s3Error('NotImplemented', 'No part copies'));
    }
    const bucket = /^\/([^/]+)\/?$/.exec(url.pathname)?.[1];
    if (request.method === 'GET' && bucket && url.searchParams.has('uploads')) {
      const prefix = url.searchParams.get('prefix') ?? '';
      const uploads = uploadsOf(s3Store, bucket).filter((u) => u.key.startsWith(prefix));
      return reply.header('content-type', 'application/xml').send(listUploadsXml(bucket, prefix, uploads));
    }
  });

  // XML allows a character as a numeric reference (Go's SDK, as ebr uses it, writes an ETag's quotes as `&#34;`);
  // fauxqs decodes only the named entities, so a complete from such a client would name no part it knows.
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (request.method !== 'POST' || !request.url.includes('uploadId=')) return payload;
    const text = Buffer.concat(await payload.toArray()).toString('utf8');
    const named = text.replace(/&#(x[0-9a-f]+|\d+);/gi, (_, n: string) => {
      const char = String.fromCodePoint(n[0].toLowerCase() === 'x' ? Number.parseInt(n.slice(1), 16) : Number(n));
      return (
        ({ '"': '&quot;', "'": '&apos;', '&': '&amp;', '<': '&lt;', '>': '&gt;' } as Record<string, string>)[char] ??
        char
      );
    });
    return Object.assign(Readable.from([Buffer.from(named)]), { receivedEncodedLength: Buffer.byteLength(text) });
  });

  const versioning = addVersioning(app, s3Store, { pageSize: options.versionsPageSize });
  if (options.copyChecksums !== false) addCopyChecksums(app, s3Store);

  const locks = new Map<string, Date | 'legal-hold'>(); // `/${bucket}/${key}`
  app.addHook('onSend', async (request, reply, payload) => {
    const lock =
      request.method === 'HEAD' || request.method === 'GET'
        ? locks.get(new URL(request.url, 'http://s3').pathname)
        : undefined;
    if (lock === 'legal-hold') reply.header('x-amz-object-lock-legal-hold', 'ON');
    else if (lock) {
      reply.header('x-amz-object-lock-mode', 'COMPLIANCE');
      reply.header('x-amz-object-lock-retain-until-date', lock.toISOString());
    }
    return payload;
  });

  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  for (const name of options.buckets ?? []) s3Store.createBucket(name);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    accessKeyId,
    secretAccessKey,
    region: 'us-east-1',
    createBucket: (name) => s3Store.createBucket(name),
    pendingUploads: (name) =>
      uploadsOf(s3Store, name).map(({ key, uploadId, parts }) => ({ key, uploadId, parts: parts.size })),
    refuseDeletes: (bucket, key, times) => refused.set(`/${bucket}/${key}`, times),
    lockObject: (bucket, key, lock) => locks.set(`/${bucket}/${key}`, lock),
    gets: (bucket) =>
      new Map(
        [...gets]
          .filter(([path]) => path.startsWith(`/${bucket}/`))
          .map(([path, n]) => [path.slice(bucket.length + 2), n]),
      ),
    configureBucket: versioning.configureBucket,
    versionsOf: versioning.versionsOf,
    stop: async () => {
      await app.close();
    },
  };
}

function uploadsOf(store: { multipartUploads: Map<string, PendingUpload> }, bucket: string): PendingUpload[] {
  return [...store.multipartUploads.values()].filter((u) => u.bucket === bucket);
}

function listUploadsXml(bucket: string, prefix: string, uploads: PendingUpload[]): string {
  const items = uploads
    .map(
      (u) =>
        `<Upload><Key>${xml(u.key)}</Key><UploadId>${xml(u.uploadId)}</UploadId>` +
        `<Initiated>${u.initiated.toISOString()}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`,
    )
    .join('');
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Bucket>${xml(bucket)}</Bucket><Prefix>${xml(prefix)}</Prefix><MaxUploads>1000</MaxUploads>` +
    `<IsTruncated>false</IsTruncated>${items}</ListMultipartUploadsResult>`
  );
}

function s3Error(code: string, message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${xml(message)}</Message></Error>`;
}

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
