import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  type HeadObjectCommandInput,
  ListMultipartUploadsCommand,
  type PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { RequestSender } from '../snapstore.js';

/** How far the server's clock may be behind ours when we look for uploads and objects of this put. */
const CLOCK_SKEW_MS = 15 * 60_000;

/** A request of a put. */
export type PutCommand =
  | PutObjectCommand
  | CreateMultipartUploadCommand
  | UploadPartCommand
  | CompleteMultipartUploadCommand;

/**
 * The requests of one put (object-upload.ts), which go through here so that the store can:
 * - send each request through the retry sender (a part is a buffer, so it can be sent again as it is);
 * - cancel every request in flight when the put is aborted or one part has failed for good;
 * - learn the upload ids, so that a failed put aborts its multipart upload before put() returns, and never
 *   leaves parts behind;
 * - settle the two ambiguous cases a lost response leaves: a create whose answer never came (an upload we
 *   do not know the id of) and a complete that did happen although we heard nothing back.
 */
export class PutRequests {
  private readonly controller = new AbortController();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly uploadIds = new Set<string>();
  private readonly partSizes = new Map<number, number>();
  private createsUnanswered = 0;
  private completedId?: string;
  /** The first error that ended the put, kept over the cancellations it caused in the other requests. */
  failure?: unknown;
  readonly startedAt = Date.now();

  constructor(
    private readonly client: S3Client,
    private readonly sender: RequestSender,
    private readonly object: Pick<HeadObjectCommandInput, 'Bucket' | 'Key' | 'SSECustomerAlgorithm' | 'SSECustomerKey'>,
  ) {}

  /** Aborted when the put is, or once one request has failed for good: every request of the put stops. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  /** One request of the put, with its retries; its output as the SDK gives it. */
  send<T>(command: PutCommand): Promise<T> {
    const signal = this.controller.signal;
    if (signal.aborted) return Promise.reject(signal.reason);
    const sending = this.sender(() => this.attempt(command, signal), signal).catch((err: unknown) => {
      this.failure ??= err;
      this.controller.abort(err); // one part failed for good: stop the others instead of uploading the rest
      throw err;
    });
    this.inFlight.add(sending);
    sending.then(
      () => this.inFlight.delete(sending),
      () => this.inFlight.delete(sending),
    );
    return sending as Promise<T>;
  }

  private async attempt(command: PutCommand, signal: AbortSignal): Promise<unknown> {
    if (command instanceof CreateMultipartUploadCommand) {
      this.createsUnanswered++;
      const out = await this.client.send(command, { abortSignal: signal });
      this.createsUnanswered--;
      if (out.UploadId) this.uploadIds.add(out.UploadId);
      return out;
    }
    if (command instanceof UploadPartCommand) {
      const body = command.input.Body as Uint8Array | undefined;
      this.partSizes.set(command.input.PartNumber ?? 0, body?.byteLength ?? 0);
    }
    if (command instanceof CompleteMultipartUploadCommand) {
      try {
        // Not cancelled once sent: an abort then could leave the object there while put() fails.
        const out = await this.client.send(command);
        this.completedId = command.input.UploadId;
        return out;
      } catch (err) {
        // An earlier try may have completed it and lost the answer; then the upload is gone and the object is there.
        if ((err as Error).name === 'NoSuchUpload' && (await this.landed())) {
          this.completedId = command.input.UploadId;
          return {};
        }
        throw err;
      }
    }
    return this.client.send(command as never, { abortSignal: signal });
  }

  private async landed(): Promise<boolean> {
    const expected = [...this.partSizes.values()].reduce((a, b) => a + b, 0);
    try {
      const head = await this.client.send(new HeadObjectCommand(this.object));
      return head.ContentLength === expected && (head.LastModified?.getTime() ?? 0) >= this.startedAt - CLOCK_SKEW_MS;
    } catch {
      return false;
    }
  }

  /** After a failed or aborted put: stop what is in flight, then abort every multipart upload this put began. */
  async abandon(reason: unknown): Promise<void> {
    this.controller.abort(reason);
    await Promise.allSettled([...this.inFlight]);
    const ids = [...this.uploadIds].filter((id) => id !== this.completedId);
    await Promise.allSettled(ids.map((id) => this.abortUpload(id)));
    if (this.createsUnanswered > 0) await this.abortStrays();
  }

  /** After a successful put whose create was answered late or not at all: abort the uploads nobody will finish. */
  async tidy(): Promise<void> {
    const strays = [...this.uploadIds].filter((id) => id !== this.completedId);
    await Promise.allSettled(strays.map((id) => this.abortUpload(id)));
    if (this.createsUnanswered > 0) await this.abortStrays();
  }

  /** Uploads of this key begun since this put started and not ours to keep: a lost create left them. */
  private async abortStrays(): Promise<void> {
    try {
      const listing = await this.sender(() =>
        this.client.send(new ListMultipartUploadsCommand({ Bucket: this.object.Bucket, Prefix: this.object.Key })),
      );
      const strays = (listing.Uploads ?? []).filter(
        (u) =>
          u.Key === this.object.Key &&
          u.UploadId !== this.completedId &&
          (u.Initiated?.getTime() ?? 0) >= this.startedAt - CLOCK_SKEW_MS,
      );
      await Promise.allSettled(strays.map((u) => this.abortUpload(u.UploadId!)));
    } catch {
      // Best effort: cleanupIncompleteUploads() and the bucket's lifecycle rule catch what is left.
    }
  }

  private async abortUpload(uploadId: string): Promise<void> {
    try {
      await this.sender(() =>
        this.client.send(
          new AbortMultipartUploadCommand({ Bucket: this.object.Bucket, Key: this.object.Key, UploadId: uploadId }),
        ),
      );
    } catch (err) {
      if ((err as Error).name !== 'NoSuchUpload') throw err;
    }
  }
}
