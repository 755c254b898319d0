import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type S3Client,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { statusOf } from '../retry.js';
import {
  type CopySource,
  type CopyWay,
  ObjectNotFoundError,
  type PutOptions,
  type RequestSender,
  sendOnce,
} from '../snapstore.js';
import { storedDigestMismatch } from '../stored-digest.js';
import { encryptionParams, type S3Config } from './config.js';
import { s3Failure } from './errors.js';

/** The most one UploadPartCopy copies; a larger object would need parts whose checksums S3 only combines. */
const MAX_ONE_PART = 5 * 1024 ** 3;

/**
 * Copies that S3 makes between two objects of one endpoint, the bytes never leaving the server: one UploadPartCopy
 * into a multipart upload that asks for SHA-256 checksums, so S3 answers with the sha256 of the bytes it copied. The
 * upload is completed only when that is the sha256 recorded of the source, and aborted otherwise (nothing lands).
 * Where S3 cannot be asked (SSE-C keys, an object over 5 GiB, the source unreadable with these credentials) or does
 * not answer with a checksum (servers that do not compute them: then not asked again), the caller streams instead.
 */
export class S3ServerCopies {
  /** False once the server showed it cannot make or prove such copies. */
  private serverChecksums = true;

  constructor(
    private readonly config: S3Config,
    private readonly client: S3Client,
  ) {}

  /** This store's object as a source of a copy on its endpoint, or undefined where a copy could not read it. */
  source(key: string): CopySource | undefined {
    if (this.config.sseCustomer) return undefined;
    return { kind: 's3', endpoint: this.endpoint(), bucket: this.config.bucket, key };
  }

  /** Whether this store's server may copy `source`, of `size` bytes, and prove the copy. */
  canCopy(source: CopySource, size: number): source is CopySource & { kind: 's3' } {
    if (source.kind !== 's3' || source.endpoint !== this.endpoint() || !this.serverChecksums) return false;
    return !this.config.sseCustomer && size > 0 && size <= MAX_ONE_PART;
  }

  /** Undefined where the server did not copy after all (see canCopy and the class), nothing stored then. */
  async copy(
    name: string,
    key: string,
    source: CopySource & { kind: 's3' },
    expected: { sha256: string },
    options: PutOptions & { source: string },
  ): Promise<CopyWay | undefined> {
    const send: RequestSender = options.send ?? sendOnce;
    const { signal } = options;
    const { bucket: Bucket } = this.config;
    const created = await send(
      () =>
        this.client.send(
          new CreateMultipartUploadCommand({
            Bucket,
            Key: key,
            Metadata: options.metadata,
            ContentType: 'application/octet-stream',
            ChecksumAlgorithm: 'SHA256',
            ...encryptionParams(this.config),
          }),
          { abortSignal: signal },
        ),
      signal,
    ).catch((err: unknown) => this.refused(name, options.source, err));
    if (!created) return undefined;
    const UploadId = created.UploadId as string;
    let completed = false;
    try {
      const part = await send(
        () =>
          this.client.send(
            new UploadPartCopyCommand({
              Bucket,
              Key: key,
              UploadId,
              PartNumber: 1,
              CopySource: `${source.bucket}/${source.key.split('/').map(encodeURIComponent).join('/')}`,
            }),
            { abortSignal: signal },
          ),
        signal,
      ).catch((err: unknown) => {
        if ((err as Error).name === 'NoSuchKey' || statusOf(err) === 404) {
          throw new ObjectNotFoundError(options.source, name, { cause: err });
        }
        return this.refused(name, options.source, err);
      });
      if (!part) return undefined;
      const checksum = part.CopyPartResult?.ChecksumSHA256;
      if (!checksum) {
        this.serverChecksums = false;
        return undefined;
      }
      if (Buffer.from(checksum, 'base64').toString('hex') !== expected.sha256) {
        throw storedDigestMismatch(`${options.source}/${name}`);
      }
      const Parts = [{ PartNumber: 1, ETag: part.CopyPartResult?.ETag, ChecksumSHA256: checksum }];
      await send(
        () =>
          this.client.send(
            new CompleteMultipartUploadCommand({ Bucket, Key: key, UploadId, MultipartUpload: { Parts } }),
            { abortSignal: signal },
          ),
        signal,
      ).catch((err: unknown) => {
        throw s3Failure(this.config, `copy "${name}" from ${options.source}`, err);
      });
      completed = true;
      return 'server';
    } finally {
      if (!completed) {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId })).catch(() => undefined);
      }
    }
  }

  /**
   * A request of the copy the server would not take: undefined, for the object to be streamed instead, where the
   * server cannot make such a copy (400, 405, 501: no checksums on uploads, no part copies, a bucket option that
   * wants what only a put of the bytes gives; not asked again) or these credentials may not read the source (403);
   * any other failure is the copy's.
   */
  private refused(name: string, source: string, err: unknown): undefined {
    const status = statusOf(err);
    if (status === 400 || status === 405 || status === 501) this.serverChecksums = false;
    else if (status !== 403) throw s3Failure(this.config, `copy "${name}" from ${source}`, err);
    return undefined;
  }

  /** Which server answers: two stores with the same one can copy between them (AWS copies across its regions). */
  private endpoint(): string {
    return this.config.endpoint ?? 'aws';
  }
}
