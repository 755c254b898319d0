/** S3 multipart uploads: what a killed process leaves, and how cleanupIncompleteUploads clears it. */
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { cleanupIncompleteUploads, type SnapStore } from '@etcd-steward/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTypescript } from '../../../../test/servers/typescript-child.js';
import { S3_PART_SIZE, type S3Target, startS3Target } from './s3-target.js';
import { bodyOf, randomData, readAll } from './streams.js';

const child = fileURLToPath(new URL('./fixtures/upload-child.ts', import.meta.url));

describe('S3 incomplete multipart uploads', () => {
  let target: S3Target;
  const stores: SnapStore[] = [];
  const open = async (prefix: string) => {
    const store = await target.open(prefix);
    stores.push(store);
    return store;
  };

  beforeAll(async () => {
    target = await startS3Target();
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close?.()));
    await target?.stop();
  });

  it('a process killed mid-upload leaves no object, and cleanupIncompleteUploads aborts its parts', async () => {
    const name = 'v2/Full-00000000-00000100-1700000000';
    const upload = spawnTypescript(
      child,
      [target.url('killed'), name, String(100 * S3_PART_SIZE), String(10 * S3_PART_SIZE)],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    const exited = once(upload, 'exit');
    const pending = () => target.server.pendingUploads(target.bucket).filter((u) => u.key === `killed/${name}`);
    await waitFor(() => pending().some((u) => u.parts >= 2), 30_000);
    upload.kill('SIGKILL');
    await exited;

    const store = await open('killed');
    const other = await open('other');
    expect(await store.stat(name)).toBeUndefined();
    expect(await store.list()).toEqual([]);
    expect(pending()).toHaveLength(1);

    // The next put of the same name does not trip over the leftover.
    const data = randomData(S3_PART_SIZE + 10);
    await store.put(name, bodyOf(data));
    expect((await readAll(await store.get(name))).equals(data)).toBe(true);

    expect(await cleanupIncompleteUploads(other, 0)).toBe(0); // another prefix's uploads are not its business
    expect(await cleanupIncompleteUploads(store, 60 * 60_000)).toBe(0); // younger than an hour: maybe still running
    expect(await cleanupIncompleteUploads(store, 0)).toBe(1);
    expect(target.server.pendingUploads(target.bucket)).toEqual([]);
    expect((await readAll(await store.get(name))).equals(data)).toBe(true);
  });

  it('cleanupIncompleteUploads says undefined for stores without multipart uploads', async () => {
    const { LocalStore } = await import('@etcd-steward/core');
    expect(await cleanupIncompleteUploads(new LocalStore('/nonexistent'), 0)).toBeUndefined();
  });
});

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
