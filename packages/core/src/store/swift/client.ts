import { withTimeout } from '../request-timeout.js';
import { SwiftAuth } from './auth.js';
import type { SwiftConfig } from './config.js';
import { SwiftHttpError } from './errors.js';

/**
 * Swift's object API as plain HTTP (docs/stores.md says why no client library): one container's objects, each
 * request with the session's token, logged in again once when a token is refused. Each request is made once:
 * retries are RetryingStore's. The timeout covers the wait for the answer; a body streams for as long as it takes.
 */
export class SwiftClient {
  private readonly auth: SwiftAuth;

  constructor(
    private readonly config: SwiftConfig,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.auth = new SwiftAuth(config, env);
  }

  /**
   * A request on the container (`key` undefined) or on one object. Resolves with the response of any status but
   * 401; the body is left to the caller (`drain` reads it away when nobody wants it).
   */
  async request(
    method: string,
    key: string | undefined,
    options: {
      query?: Record<string, string>;
      headers?: Record<string, string>;
      body?: Buffer | string;
      signal?: AbortSignal;
    } = {},
  ): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      const session = await this.auth.current();
      const path = key === undefined ? '' : `/${key.split('/').map(encodeURIComponent).join('/')}`;
      const query = options.query ? `?${new URLSearchParams(options.query)}` : '';
      const url = `${session.storageUrl}/${encodeURIComponent(this.config.container)}${path}${query}`;
      const response = await withTimeout(this.config.transfer.timeoutMs, options.signal, (signal) =>
        fetch(url, {
          method,
          headers: { ...options.headers, 'x-auth-token': session.token },
          body: options.body as BodyInit | undefined,
          signal,
        }),
      );
      if (response.status !== 401) return response;
      await drain(response);
      this.auth.refused(session);
      if (attempt >= 2) throw new SwiftHttpError(401, `${method} ${this.config.location}: 401 Unauthorized`);
    }
  }

  /** A request whose answer must be a success; resolves with its body as text. */
  async expectOk(
    method: string,
    key: string | undefined,
    options: Parameters<SwiftClient['request']>[2] = {},
  ): Promise<string> {
    const response = await this.request(method, key, options);
    const text = await response.text();
    if (!response.ok) {
      throw new SwiftHttpError(
        response.status,
        `${method} ${key ?? this.config.container}: ${response.status} ${text.trim().slice(0, 300) || response.statusText}`,
      );
    }
    return text;
  }
}

/** Reads a body nobody needs, so that its connection can serve the next request. */
export async function drain(response: Response): Promise<void> {
  await response.arrayBuffer().catch(() => undefined);
}
