import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChild } from '../src/common/child-thread.js';
import { silentLogger } from '../src/common/logger.js';

/** runChild against a real worker thread that serves a request the way the replay thread does (serveParent). */
describe('runChild (a real worker thread)', () => {
  let dir: string;
  let entry: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'child-thread-'));
    entry = join(dir, 'child.mjs');
    const core = new URL('../dist/common/child-thread.js', import.meta.url).href;
    // doubles a number; with `wait`, runs until its parent asks it to stop, and says so
    await writeFile(
      entry,
      `const { serveParent } = await import(${JSON.stringify(core)});
       const { threadId } = await import('node:worker_threads');
       serveParent(async (request, logger, signal) => {
         if (request.wait) {
           logger.info('waiting');
           await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped by its parent, cleaned up'))));
         }
         if (request.linger) setInterval(() => {}, 1000); // a handle left open: the caller must not wait on it
         if (request.hog) { const held = []; for (;;) held.push(new Array(1e5).fill(held.length)); }
         return { doubled: request.n * 2, pid: process.pid, threadId };
       });`,
    );
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const threadOptions = (signal?: AbortSignal) => ({
    entry,
    thread: { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 32 },
    name: 'the thread',
    logger: silentLogger,
    signal,
  });

  it('runs the request in a thread of this process, and is gone when the call resolves, open handles and all', async () => {
    const result = await runChild<{ doubled: number; pid: number; threadId: number }>(threadOptions(), {
      n: 21,
      linger: true,
    });
    expect(result.doubled).toBe(42);
    expect(result.pid).toBe(process.pid);
    expect(result.threadId).toBeGreaterThan(0);
  });

  it('an abort asks it to stop, and its outcome settles the call', async () => {
    const controller = new AbortController();
    const running = runChild(threadOptions(controller.signal), { n: 1, wait: true });
    setTimeout(() => controller.abort(new Error('the caller gave up')), 300);
    await expect(running).rejects.toThrow('stopped by its parent, cleaned up');
  });

  it('with a signal aborted before it starts: no thread, the reason', async () => {
    await expect(
      runChild(threadOptions(AbortSignal.abort(new Error('stopped before it began'))), { n: 1 }),
    ).rejects.toThrow('stopped before it began');
  });

  it('a thread past its heap limit fails the call; this process goes on', async () => {
    await expect(runChild(threadOptions(), { n: 1, hog: true })).rejects.toThrow(/memory/i);
    expect(await runChild<{ doubled: number }>(threadOptions(), { n: 2 })).toMatchObject({ doubled: 4 });
  });
});
