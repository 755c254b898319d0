import { writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FaultProxy, startFaultProxy } from './servers/fault-proxy.ts';
import { type S3TestServer, startS3Server, writeS3Credentials } from './servers/s3-server.ts';
import { switchableStore } from './switchable-store.ts';

/**
 * The store of a fault run (docs/proof.md §5), which the run can take down for a while and, when it is S3, make
 * answer a share of requests with errors: a local folder behind a symlink (down: the symlink points at a file),
 * or an S3 test server behind the fault proxy (down: every request refused or reset; errors: a share of requests
 * get 503s, resets, lost or cut responses). `url` is what the sidecars and the programs of the schedule use, and
 * what goes down; `directUrl` reaches the same objects past the fault (the real folder, or the S3 server itself),
 * for the oracle's reads and for a restore made while the sidecars' store is down (an operator restoring from
 * where the store answers).
 */
export interface FaultStore {
  url: string;
  directUrl: string;
  /** The environment the store's clients need (S3 credentials). */
  env: NodeJS.ProcessEnv;
  canFail: boolean;
  /** Down for `ms`; says what the store's clients met, where it can tell. */
  down(ms: number): Promise<string>;
  /** Down from now until the answer's `end` is called (an outage that spans other operations). */
  outage(): Promise<{ end(): Promise<string> }>;
  errors(ms: number, rate: number): Promise<string>;
  /**
   * Resolves once a sidecar may start: a sidecar refuses a local store whose folder is not a directory (exit 2, as a
   * usage error), so on a local store it starts once the outage is over; on S3 at once (it retries the store).
   */
  readyForStart(): Promise<void>;
  stop(): Promise<void>;
}

export async function faultStore(kind: 'local' | 's3', at: (...names: string[]) => string): Promise<FaultStore> {
  return kind === 'local' ? localFaultStore(at) : s3FaultStore(at);
}

/** Outages may overlap (a short one inside a long one): the store is up again when the last one ends. */
function outageCounter(apply: (down: boolean) => Promise<void>) {
  let open = 0;
  const begin = async () => {
    if (open++ === 0) await apply(true);
    let ended = false;
    return async () => {
      if (ended) return;
      ended = true;
      if (--open === 0) await apply(false);
    };
  };
  return Object.assign(begin, { isDown: () => open > 0 });
}

async function localFaultStore(at: (...names: string[]) => string): Promise<FaultStore> {
  const store = await switchableStore(at, 'store');
  const storeDir = await store.directory('up');
  await store.point(storeDir);
  await writeFile(at('store-down'), 'the store is down');
  const begin = outageCounter((down) => store.point(down ? at('store-down') : storeDir));
  const outage = async () => {
    const end = await begin();
    return {
      async end() {
        await end();
        return 'the store folder was a file';
      },
    };
  };
  return {
    url: store.url,
    directUrl: `file://${storeDir}`,
    env: {},
    canFail: false,
    outage,
    async down(ms) {
      const o = await outage();
      await sleep(ms);
      return o.end();
    },
    async errors() {
      throw new Error('a local store cannot answer with errors');
    },
    async readyForStart() {
      while (begin.isDown()) await sleep(100);
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
  await writeS3Credentials(credentials, server);
  const url = (endpoint: string) => `s3://backups/etcd?endpoint=${encodeURIComponent(endpoint)}`;
  const p = proxy;
  // An outage wins over an error window; each window restores what was in effect before it when it ends.
  let down = false;
  let errorWindow: { rate: number; faults: FaultProxy['faults'] } | undefined;
  const apply = () => {
    if (down) {
      p.faults = ['503', 'reset'];
      p.failureRate = 1;
    } else if (errorWindow) {
      p.faults = errorWindow.faults;
      p.failureRate = errorWindow.rate;
    } else p.failureRate = 0;
  };
  const failed = () => Object.values(p.stats.faults).reduce((a, b) => a + b, 0);
  const begin = outageCounter(async (d) => {
    down = d;
    apply();
  });
  const outage = async () => {
    const requests = p.stats.requests;
    const before = failed();
    const end = await begin();
    return {
      async end() {
        await end();
        return `${failed() - before} of ${p.stats.requests - requests} store requests failed`;
      },
    };
  };
  return {
    url: url(p.endpoint),
    directUrl: url(server.endpoint),
    env: { AWS_APPLICATION_CREDENTIALS_JSON: credentials, AWS_EC2_METADATA_DISABLED: 'true' },
    canFail: true,
    outage,
    async down(ms) {
      const o = await outage();
      await sleep(ms);
      return o.end();
    },
    async errors(ms, rate) {
      const requests = p.stats.requests;
      const before = failed();
      errorWindow = { rate, faults: ['503', 'reset', 'lost-response', 'cut-response', 'stall'] };
      apply();
      await sleep(ms);
      errorWindow = undefined;
      apply();
      return `${failed() - before} of ${p.stats.requests - requests} store requests failed`;
    },
    async readyForStart() {},
    async stop() {
      await p.stop();
      await server.stop();
    },
  };
}
