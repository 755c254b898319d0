import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A store server started by a test: where to reach it, and how to stop it. */
export interface TestServer {
  endpoint: string;
  stop(): Promise<void>;
}

/** Loopback only, on a free port: tests share the machine and must not be reachable from outside it. */
export async function listenOnLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
