import type { Readable } from 'node:stream';
import {
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type CreateMultipartUploadCommandOutput,
  PutObjectCommand,
  type PutObjectCommandInput,
  UploadPartCommand,
  type UploadPartCommandOutput,
} from '@aws-sdk/client-s3';
import { OperationError, UsageError } from '../../common/errors.js';
import { beforeSending, cutIntoParts, sendInParts, wholeOrParts } from '../parts/part-queue.js';
import type { PutRequests } from './put-requests.js';

/** The object a put makes, as PutObject (and CreateMultipartUpload) take it, without its body. */
export type UploadedObject = Omit<PutObjectCommandInput, 'Body'> & { Bucket: string; Key: string };

/** S3's limit on the parts of one multipart upload. */
const MAX_PARTS = 10_000;

export interface ObjectUploadOptions {
  partSize: number;
  partsInFlight: number;
  /** CRC32 checksums on every part (requestChecksumCalculation=WHEN_SUPPORTED): the upload is created for them. */
  partChecksums: boolean;
  /** The store and object, for the error of an object too large for its parts. */
  location: string;
}

/**
 * Streams a body to one S3 object: a single PutObject when it fits in one part, else a multipart upload of
 * `partSize` parts, `partsInFlight` at once, filled into part buffers used again (part-buffers.ts) rather than
 * joined from the body's chunks into a new buffer each. Every request goes through `requests`: its retries,
 * its cancellation, and the clean-up of an upload that failed.
 */
export async function uploadObject(
  requests: PutRequests,
  object: UploadedObject,
  body: Readable,
  options: ObjectUploadOptions,
): Promise<void> {
  const { partSize, partsInFlight } = options;
  const { Bucket, Key, SSECustomerAlgorithm, SSECustomerKey } = object;
  // what every request names (the customer's key too, SSE-C); the rest only the object's creation
  const part = { Bucket, Key, SSECustomerAlgorithm, SSECustomerKey };
  const cut = await wholeOrParts(cutIntoParts(body, partSize));
  if (!cut.parts) {
    await requests.send(new PutObjectCommand({ ...object, Body: cut.whole }));
    return;
  }
  const { UploadId } = await beforeSending(
    cut.parts,
    requests.send<CreateMultipartUploadCommandOutput>(
      new CreateMultipartUploadCommand({ ...object, ...(options.partChecksums && { ChecksumAlgorithm: 'CRC32' }) }),
    ),
  );
  const done: CompletedPart[] = [];
  await sendInParts(
    body,
    { partSize, partsInFlight, signal: requests.signal },
    async (index, data) => {
      if (index >= MAX_PARTS) {
        throw new UsageError(
          `${options.location}: "${Key}" needs more than ${MAX_PARTS} parts of ${partSize} bytes: raise ?partSize=`,
        );
      }
      const PartNumber = index + 1;
      const sent = await requests.send<UploadPartCommandOutput>(
        new UploadPartCommand({ ...part, UploadId, PartNumber, Body: data }),
      );
      if (!sent.ETag) throw new OperationError(`S3 answered part ${PartNumber} of "${Key}" without an ETag`);
      // The part's checksum, which the complete must repeat when the upload was created for checksums.
      const { ETag, ChecksumCRC32, ChecksumCRC32C, ChecksumSHA1, ChecksumSHA256 } = sent;
      done[index] = { PartNumber, ETag, ChecksumCRC32, ChecksumCRC32C, ChecksumSHA1, ChecksumSHA256 };
    },
    cut.parts,
  );
  requests.signal.throwIfAborted();
  await requests.send(new CompleteMultipartUploadCommand({ ...part, UploadId, MultipartUpload: { Parts: done } }));
}
