import type { IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { http } from '../../common/node-http.js';

/**
 * One HTTP request with a small answer, for the resumable upload's chunks. node:http writes a Buffer body to
 * the socket as it is; fetch copies it into a web stream first, which for 8 MiB chunks costs tens of MB of
 * short-lived buffers, all counted in the uploader's peak memory.
 */
export interface SmallResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };

export function sendRequest(
  url: string,
  options: { method: string; headers?: Record<string, string>; body?: Buffer; signal?: AbortSignal },
): Promise<SmallResponse> {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  const send = secure ? httpsRequest : http.request;
  const body = options.body ?? Buffer.alloc(0);
  return new Promise((resolve, reject) => {
    const req = send(
      target,
      {
        method: options.method,
        headers: { ...options.headers, 'content-length': String(body.length) },
        agent: secure ? agents.https : agents.http,
        signal: options.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
