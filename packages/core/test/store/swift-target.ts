import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type SnapStore } from '@etcd-steward/core';
import { type SwiftServer, startSwift } from '../../../../test/servers/swift-server.js';
import { FAST_RETRIES } from './s3-target.js';

/** Swift's smallest segment but the last, so that multi-segment tests stay small. */
export const SWIFT_PART_SIZE = 1024 * 1024;

export interface SwiftTarget {
  server: SwiftServer;
  container: string;
  /** ebr's credentials as a JSON file (OPENSTACK_APPLICATION_CREDENTIALS_JSON), auth v1 against the server. */
  credentialsFile: string;
  url(prefix: string, query?: Record<string, string>): string;
  /** Opens a store, with credentials whose authURL is `authUrl` (default the server's auth v1). */
  open(prefix: string, query?: Record<string, string>, authUrl?: string): Promise<SnapStore>;
  /** Segments that no manifest names: what a failed or aborted upload would leave. */
  strandedSegments(): Promise<string[]>;
  stop(): Promise<void>;
}

export async function startSwiftTarget(container = 'backups'): Promise<SwiftTarget> {
  const dir = await mkdtemp(join(tmpdir(), 'swift-'));
  let server: SwiftServer | undefined;
  try {
    server = await startSwift(join(dir, 'swift'));
    await server.createContainer(container);
  } catch (err) {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const swift = server;
  const credentialsFile = join(dir, 'credentials.json');
  const writeCredentials = (authURL: string) =>
    writeFile(credentialsFile, JSON.stringify({ authURL, username: swift.user, password: swift.password }));
  await writeCredentials(swift.authUrl);
  const url = (prefix: string, query: Record<string, string> = {}) =>
    `swift://${container}/${prefix}?${new URLSearchParams({ partSize: String(SWIFT_PART_SIZE), ...query })}`;
  return {
    server: swift,
    container,
    credentialsFile,
    url,
    open: async (prefix, query, authUrl = swift.authUrl) => {
      await writeCredentials(authUrl);
      return openStore(url(prefix, query), {
        retry: FAST_RETRIES,
        env: { OPENSTACK_APPLICATION_CREDENTIALS_JSON: credentialsFile },
      });
    },
    strandedSegments: async () => {
      const names = (await swift.listAll(container)).map((o) => o.name);
      const objects = new Set(names);
      return names.filter((n) => /\/[0-9a-z]+\.\d{10}$/.test(n) && !objects.has(n.slice(0, n.lastIndexOf('/'))));
    },
    stop: async () => {
      await swift.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
