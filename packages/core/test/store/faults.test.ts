/**
 * Every cloud provider through the fault proxy: with 30% of requests failing (503s, resets, lost and cut
 * responses, stalls), a 64 MB upload completes and reads back byte-identical, and nothing partial is left.
 */
import type { SnapStore } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultProxy, startFaultProxy } from '../../../../test/servers/fault-proxy.js';
import { startAzureTarget } from './azure-target.js';
import { startGcsTarget } from './gcs-target.js';
import { startOssTarget } from './oss-target.js';
import { startS3Target } from './s3-target.js';
import { generatedBody, randomData, sha256Of, stallingBody } from './streams.js';
import { startSwiftTarget } from './swift-target.js';

const SIZE = 64 * 1024 * 1024;

interface FaultTarget {
  /** Where the proxy sends requests (the server's origin). */
  origin: string;
  /** Opens a store whose requests go to `endpoint` (the proxy). */
  open(prefix: string, endpoint: string, query?: Record<string, string>): Promise<SnapStore>;
  pendingUploads(): Promise<number>;
  stop(): Promise<void>;
}

const providers: Record<string, () => Promise<FaultTarget>> = {
  S3: async () => {
    const t = await startS3Target();
    return {
      origin: t.server.endpoint,
      open: (prefix, endpoint, query) => t.open(prefix, { endpoint, ...query }),
      pendingUploads: async () => t.server.pendingUploads(t.bucket).length,
      stop: t.stop,
    };
  },
  GCS: async () => {
    const t = await startGcsTarget();
    return {
      origin: t.server.endpoint,
      open: (prefix, endpoint, query) => t.open(prefix, { endpoint, partSize: '8MiB', ...query }),
      pendingUploads: async () => t.server.openSessions(),
      stop: t.stop,
    };
  },
  Azure: async () => {
    const t = await startAzureTarget();
    const origin = new URL(t.server.endpoint).origin;
    const account = new URL(t.server.endpoint).pathname; // azurite's URLs name the account in the path
    return {
      origin,
      open: (prefix, endpoint, query) =>
        t.open(prefix, { endpoint: `${endpoint}${account}`, partSize: '4MiB', ...query }),
      pendingUploads: async () => 0, // uncommitted blocks are invisible, and Azure drops them by itself
      stop: t.stop,
    };
  },
  // Logged in through the proxy: tempauth hands out a storage URL on the host it was asked on, the proxy's.
  Swift: async () => {
    const t = await startSwiftTarget();
    return {
      origin: t.server.endpoint,
      open: (prefix, endpoint, query) => t.open(prefix, { partSize: '4MiB', ...query }, `${endpoint}/auth/v1.0`),
      pendingUploads: async () => (await t.strandedSegments()).length,
      stop: t.stop,
    };
  },
  OSS: async () => {
    const t = await startOssTarget();
    return {
      origin: t.server.endpoint,
      open: (prefix, endpoint, query) => t.open(prefix, { endpoint, partSize: '4MiB', ...query }),
      pendingUploads: async () => t.server.pendingUploads(t.bucket).length,
      stop: t.stop,
    };
  },
};

for (const [provider, start] of Object.entries(providers)) {
  describe(`${provider} through a faulty network`, () => {
    let target: FaultTarget;
    let proxy: FaultProxy;
    let store: SnapStore;

    beforeAll(async () => {
      target = await start();
      proxy = await startFaultProxy({ target: target.origin, seed: 7, stallMs: 200 });
      store = await target.open('faults', proxy.endpoint);
    });
    afterAll(async () => {
      await store?.close?.();
      await proxy?.stop();
      await target?.stop();
    });

    it('uploads 64 MB and reads it back byte-identical with 30% of requests failing', async () => {
      const expected = await sha256Of(generatedBody(SIZE));
      proxy.failureRate = 0.3;
      await store.put('v2/Full-00000000-00000064-1700000000', generatedBody(SIZE), {
        metadata: { sha256: expected.sha256 },
      });
      const back = await sha256Of(await store.get('v2/Full-00000000-00000064-1700000000'));
      expect(back).toEqual(expected);
      const faults = Object.values(proxy.stats.faults).reduce((a, b) => a + b, 0);
      expect(faults).toBeGreaterThan(3);

      proxy.failureRate = 0;
      expect(await store.list()).toMatchObject([{ name: 'v2/Full-00000000-00000064-1700000000', size: SIZE }]);
      expect((await store.stat('v2/Full-00000000-00000064-1700000000'))?.metadata).toEqual({ sha256: expected.sha256 });
      expect(await target.pendingUploads()).toBe(0);
    });

    it('an upload aborted midway under faults leaves nothing', async () => {
      proxy.failureRate = 0.3;
      const controller = new AbortController();
      const put = store
        .put('v2/aborted', stallingBody(randomData(24 * 1024 * 1024), 18 * 1024 * 1024), { signal: controller.signal })
        .then(
          () => 'finished',
          (err: Error) => err.name,
        );
      await new Promise((resolve) => setTimeout(resolve, 1500));
      controller.abort();
      expect(await put).toBe('AbortError');
      proxy.failureRate = 0;
      expect(await store.stat('v2/aborted')).toBeUndefined();
      expect((await store.list()).map((o) => o.name)).toEqual(['v2/Full-00000000-00000064-1700000000']);
      expect(await target.pendingUploads()).toBe(0);
    });

    it('gives up on requests that hang (timeout), and retries them', async () => {
      const hanging = await startFaultProxy({ target: target.origin, seed: 3, faults: ['hang'], failureRate: 0 });
      const quick = await target.open('hang', hanging.endpoint, { timeout: '1s' });
      try {
        hanging.failureRate = 0.2;
        const expected = await sha256Of(generatedBody(10 * 1024 * 1024));
        await quick.put('v2/hung', generatedBody(10 * 1024 * 1024));
        expect(await sha256Of(await quick.get('v2/hung'))).toEqual(expected);
        expect(hanging.stats.faults.hang).toBeGreaterThan(0);
      } finally {
        await quick.close?.();
        await hanging.stop();
      }
    });
  });
}
