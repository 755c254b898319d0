import { writeFile } from 'node:fs/promises';
import { type FaultProxy, startFaultProxy } from './servers/fault-proxy.js';
import { type S3TestServer, startS3Server } from './servers/s3-server.js';
import { switchableStore } from './switchable-store.js';

/**
 * The store of a fault run (docs/proof.md §5), which the run can take down for a while and, when it is S3, make
 * answer a share of requests with errors: a local folder behind a symlink (down: the folder swapped for a file),
 * or an S3 test server behind the fault proxy (down: every request refused or reset; errors: a share of requests
 * get 503s, resets, lost or cut responses). `url` is what the sidecar and the programs use; `directUrl` skips the
 * proxy, for the oracle's reads.
 */
export interface FaultStore {
  url: string;
  directUrl: string;
  /** The environment the store's clients need (S3 credentials). */
  env: NodeJS.ProcessEnv;
  canFail: boolean;
  /** Each says what the store's clients met, where it can tell. */
  down(ms: number): Promise<string>;
  errors(ms: number, rate: number): Promise<string>;
  stop(): Promise<void>;
}

export async function faultStore(kind: 'local' | 's3', at: (...names: string[]) => string): Promise<FaultStore> {
  return kind === 'local' ? localFaultStore(at) : s3FaultStore(at);
}

async function localFaultStore(at: (...names: string[]) => string): Promise<FaultStore> {
  const store = await switchableStore(at, 'store');
  const storeDir = await store.directory('up');
  await store.point(storeDir);
  await writeFile(at('store-down'), 'the store is down');
  return {
    url: store.url,
    directUrl: store.url,
    env: {},
    canFail: false,
    async down(ms) {
      await store.point(at('store-down'));
      await new Promise((r) => setTimeout(r, ms));
      await store.point(storeDir);
      return 'the store folder was a file';
    },
    async errors() {
      throw new Error('a local store cannot answer with errors');
    },
    async stop() {},
  };
}

async function s3FaultStore(at: (...names: string[]) => string): Promise<FaultStore> {
  const server: S3TestServer = await startS3Server({ buckets: ['backups'] });
  let proxy: FaultProxy | undefined;
  try {
    proxy = await startFaultProxy({ target: server.endpoint, failureRate: 0, seed: 7 });
  } catch (err) {
    await server.stop();
    throw err;
  }
  const credentials = at('s3-credentials.json');
  await writeFile(
    credentials,
    JSON.stringify({ accessKeyID: server.accessKeyId, secretAccessKey: server.secretAccessKey, region: server.region }),
  );
  const url = (endpoint: string) => `s3://backups/etcd?endpoint=${encodeURIComponent(endpoint)}`;
  const p = proxy;
  const window = async (ms: number, rate: number, faults: FaultProxy['faults']) => {
    const requests = p.stats.requests;
    const failed = Object.values(p.stats.faults).reduce((a, b) => a + b, 0);
    p.faults = faults;
    p.failureRate = rate;
    await new Promise((r) => setTimeout(r, ms));
    p.failureRate = 0;
    const now = Object.values(p.stats.faults).reduce((a, b) => a + b, 0);
    return `${now - failed} of ${p.stats.requests - requests} store requests failed`;
  };
  return {
    url: url(p.endpoint),
    directUrl: url(server.endpoint),
    env: { AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
    canFail: true,
    down: (ms) => window(ms, 1, ['503', 'reset']),
    errors: (ms, rate) => window(ms, rate, ['503', 'reset', 'lost-response', 'cut-response', 'stall']),
    async stop() {
      await p.stop();
      await server.stop();
    },
  };
}
