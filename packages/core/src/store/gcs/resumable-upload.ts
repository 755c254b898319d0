import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { IntegrityError, OperationError } from '../../common/errors.js';
import { cutIntoParts } from '../parts/part-queue.js';
import { withTimeout } from '../request-timeout.js';
import { TransientError } from '../retry.js';
import type { RequestSender } from '../snapstore.js';
import { type SmallResponse, sendRequest } from './http-request.js';

/**
 * GCS's resumable upload protocol, chunk by chunk, each chunk one request sent through the retry sender.
 * (The client library has this too, but its retry budget is shared by the whole upload and its waits grow
 * with it, so a long upload over a flaky link runs out of retries; here every chunk gets the full policy.)
 *
 * - Chunks are `chunkSize` bytes (a multiple of 256 KiB); the last one, and only it, names the total size,
 *   so one chunk is held back until the next one (or the end) shows whether it is the last.
 * - After a failed try, the server is asked how much it has (an empty PUT), and the chunk goes on from there;
 *   if the session already finished (the answer to the last chunk was lost), that answer is taken.
 * - The MD5 GCS computes is compared with ours: end-to-end integrity.
 * The session URI is the authorization for these requests (GCS's design), so they carry no credentials.
 */
export interface ResumableOptions {
  chunkSize: number;
  timeoutMs: number;
  signal?: AbortSignal;
  send: RequestSender;
}

/** The object resource GCS answers the last chunk with (the fields we use). */
export interface UploadedObject {
  size?: string;
  md5Hash?: string;
  generation?: string;
}

/**
 * Opens an upload session for an object (`url`: the bucket's upload URL with `uploadType=resumable&name=`),
 * and returns its URI. `headers` carry the credentials, when the endpoint wants them.
 */
export async function startSession(
  url: string,
  resource: { contentType: string; metadata: Record<string, string> },
  headers: Headers | undefined,
  options: Pick<ResumableOptions, 'timeoutMs' | 'signal'>,
): Promise<string> {
  const response = await withTimeout(options.timeoutMs, options.signal, (signal) =>
    sendRequest(url, {
      method: 'POST',
      headers: { ...Object.fromEntries(headers ?? []), 'content-type': 'application/json; charset=UTF-8' },
      body: Buffer.from(JSON.stringify(resource)),
      signal,
    }),
  );
  if (response.status < 200 || response.status > 299) throw httpError(response);
  const location = response.headers.location;
  if (!location) throw new OperationError('GCS opened an upload session without saying where (no Location header)');
  return location;
}

export async function uploadResumable(
  session: string,
  body: Readable,
  options: ResumableOptions,
): Promise<UploadedObject> {
  const md5 = createHash('md5');
  let offset = 0;
  let held: Buffer | undefined;
  // An abort must also wake the loop when it waits for data from a source that has hung.
  const onAbort = () => body.destroy();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const chunks = cutIntoParts(body, options.chunkSize);
  try {
    for await (const chunk of chunks) {
      if (held) {
        await sendChunk(session, held, offset, undefined, options);
        offset += held.length;
        chunks.release(held);
      }
      md5.update(chunk);
      held = chunk;
    }
  } finally {
    chunks.end(); // the last chunk, sent below, is not given back: it is garbage once sent
    options.signal?.removeEventListener('abort', onAbort);
  }
  options.signal?.throwIfAborted();
  const last = held ?? Buffer.alloc(0);
  const object = await sendChunk(session, last, offset, offset + last.length, options);
  if (!object) throw new OperationError('the last chunk of a resumable upload did not finish it');
  const expected = md5.digest('base64');
  if (object.md5Hash && object.md5Hash !== expected) {
    throw new IntegrityError(`GCS stored other bytes than sent (md5 ${object.md5Hash}, sent ${expected})`);
  }
  return object;
}

/** Sends `data`, which starts at byte `start`; `total` only with the last chunk. */
async function sendChunk(
  session: string,
  data: Buffer,
  start: number,
  total: number | undefined,
  options: ResumableOptions,
): Promise<UploadedObject | undefined> {
  let tries = 0;
  return options.send(async () => {
    let from = start;
    if (tries++ > 0) {
      const state = await status(session, options);
      if (state.finished) return state.finished;
      from = state.persisted;
      if (from < start)
        throw new OperationError(
          `GCS lost data of the resumable upload: it has ${from} bytes, ${start} were confirmed`,
        );
      if (total === undefined && from >= start + data.length) return undefined;
    }
    const rest = data.subarray(from - start);
    const end = start + data.length - 1;
    const range = rest.length === 0 ? `bytes */${total}` : `bytes ${from}-${end}/${total ?? '*'}`;
    const response = await withTimeout(options.timeoutMs, options.signal, (signal) =>
      sendRequest(session, { method: 'PUT', headers: { 'content-range': range }, body: rest, signal }),
    );
    if (response.status === 308) {
      const persisted = persistedBytes(response);
      // The server may keep less than it was sent; the next try asks, and sends the rest.
      if (total !== undefined || persisted < end + 1)
        throw new TransientError(`GCS kept ${persisted} of ${end + 1} bytes`);
      return undefined;
    }
    if (response.status === 200 || response.status === 201) {
      return total === undefined ? undefined : (JSON.parse(response.text) as UploadedObject);
    }
    throw httpError(response);
  }, options.signal);
}

async function status(
  session: string,
  options: ResumableOptions,
): Promise<{ persisted: number; finished?: UploadedObject }> {
  const response = await withTimeout(options.timeoutMs, options.signal, (signal) =>
    sendRequest(session, { method: 'PUT', headers: { 'content-range': 'bytes */*' }, signal }),
  );
  if (response.status === 308) return { persisted: persistedBytes(response) };
  if (response.status === 200 || response.status === 201) return { persisted: 0, finished: JSON.parse(response.text) };
  throw httpError(response);
}

/** `Range: bytes=0-N` says the server has N + 1 bytes; no Range header says it has none. */
function persistedBytes(response: SmallResponse): number {
  const range = /bytes=0-(\d+)/.exec(String(response.headers.range ?? ''));
  return range ? Number(range[1]) + 1 : 0;
}

/** An error that carries the HTTP status, so that isTransient can judge it like any SDK's. */
function httpError(response: SmallResponse): Error {
  let message = response.text.slice(0, 300);
  try {
    message = (JSON.parse(response.text) as { error?: { message?: string } }).error?.message ?? message;
  } catch {
    // not JSON: keep the text
  }
  return Object.assign(new Error(`HTTP ${response.status}: ${message}`), { status: response.status });
}
