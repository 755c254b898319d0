/**
 * The checksum S3 computes of a part it copies (UploadPartCopy) into a multipart upload created with a checksum
 * algorithm: S3 answers with it in CopyPartResult (ChecksumSHA256 for SHA256) and keeps it as the part's checksum,
 * which CompleteMultipartUpload then checks the client's list against. fauxqs copies the part but computes none;
 * this adds it, after fauxqs's own handling, for SHA256 (the only one the stores ask for).
 */
import { createHash } from 'node:crypto';

interface Part {
  body: Buffer;
  checksumValue?: string;
}

interface Upload {
  checksumAlgorithm?: string;
  parts: Map<number, Part>;
}

interface OnSendApp {
  addHook(
    name: 'onSend',
    hook: (
      request: { method: string; url: string; headers: Record<string, unknown> },
      reply: { statusCode: number },
      payload: unknown,
    ) => Promise<unknown>,
  ): unknown;
}

export function addCopyChecksums(app: OnSendApp, store: { multipartUploads: Map<string, Upload> }): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.method !== 'PUT' || !request.headers['x-amz-copy-source'] || reply.statusCode !== 200) return payload;
    const query = new URL(request.url, 'http://s3').searchParams;
    const upload = store.multipartUploads.get(query.get('uploadId') ?? '');
    const part = upload?.parts.get(Number(query.get('partNumber')));
    if (!part || upload?.checksumAlgorithm !== 'SHA256' || typeof payload !== 'string') return payload;
    part.checksumValue = createHash('sha256').update(part.body).digest('base64');
    return payload.replace(
      '</CopyPartResult>',
      `<ChecksumSHA256>${part.checksumValue}</ChecksumSHA256></CopyPartResult>`,
    );
  });
}
