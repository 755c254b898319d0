import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';

/** What every route but the open ones (snapshots, initialization) asks of a caller; nothing by default, as ebr. */
export interface AccessOptions {
  /** The bearer token a caller must send (--server-token-file). */
  token?: Buffer;
  /** A caller must present a certificate the server's client CA signed (--server-tls-client-ca). */
  clientCertificate?: boolean;
}

/**
 * Decides whether a request may use a route that is not open. The token is compared through its sha256, in
 * constant time, so neither its content nor its length shows in the answer's timing; it never reaches a log.
 */
export class ApiAccess {
  private readonly tokenDigest?: Buffer;

  constructor(private readonly options: AccessOptions) {
    this.tokenDigest = options.token && digest(options.token);
  }

  /** Why the request is refused, or undefined when it may go on. */
  refusal(request: IncomingMessage): string | undefined {
    if (this.options.clientCertificate && !(request.socket as TLSSocket).authorized) {
      return 'this endpoint needs a client certificate signed by the CA of --server-tls-client-ca';
    }
    if (this.tokenDigest) {
      const presented = /^Bearer (.+)$/i.exec(request.headers.authorization ?? '')?.[1];
      if (presented === undefined || !timingSafeEqual(digest(Buffer.from(presented)), this.tokenDigest)) {
        return 'this endpoint needs the token of --server-token-file: send "Authorization: Bearer <token>"';
      }
    }
    return undefined;
  }
}

function digest(value: Buffer): Buffer {
  return createHash('sha256').update(value).digest();
}
