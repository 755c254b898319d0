import { AbortMultipartUploadCommand, ListMultipartUploadsCommand, type S3Client } from '@aws-sdk/client-s3';
import { listingPrefix } from '../object-name.js';
import { type RequestSender, sendOnce } from '../snapstore.js';
import type { S3Config } from './config.js';
import { s3Failure } from './errors.js';

/**
 * Aborts multipart uploads under the store's prefix begun more than `olderThanMs` ago: what a process killed
 * mid-upload (SIGKILL, OOM) leaves behind. They are invisible to list and get, but their parts are billed.
 * Resolves with the number aborted. A bucket lifecycle rule (AbortIncompleteMultipartUpload) does the same
 * server-side; this is for servers without one.
 */
export async function abortStaleUploads(
  config: S3Config,
  client: S3Client,
  olderThanMs: number,
  send: RequestSender = sendOnce,
): Promise<number> {
  const before = Date.now() - olderThanMs;
  const prefix = listingPrefix(config.prefix, '');
  let aborted = 0;
  let keyMarker: string | undefined;
  let uploadIdMarker: string | undefined;
  try {
    do {
      const page = await send(() =>
        client.send(
          new ListMultipartUploadsCommand({
            Bucket: config.bucket,
            Prefix: prefix,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
        ),
      );
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId || (upload.Initiated?.getTime() ?? 0) > before) continue;
        try {
          await send(() =>
            client.send(
              new AbortMultipartUploadCommand({
                Bucket: config.bucket,
                Key: upload.Key,
                UploadId: upload.UploadId,
              }),
            ),
          );
          aborted++;
        } catch (err) {
          if ((err as Error).name !== 'NoSuchUpload') throw err;
        }
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker);
  } catch (err) {
    throw s3Failure(config, 'clean up incomplete uploads', err);
  }
  return aborted;
}
