import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChild } from '../src/common/child-process.js';
import { silentLogger } from '../src/common/logger.js';

/** runChild against a real child process that serves a request the way the replay process does (serveParent). */
describe('runChild (a real child process)', () => {
  let dir: string;
  let entry: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'child-process-'));
    entry = join(dir, 'child.mjs');
    const core = new URL('../dist/common/child-process.js', import.meta.url).href;
    // doubles a number; with `wait`, runs until its parent asks it to stop, and says so
    await writeFile(
      entry,
      `const { serveParent } = await import(${JSON.stringify(core)});
       serveParent(async (request, logger, signal) => {
         if (request.wait) {
           logger.info('waiting');
           await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped by its parent, cleaned up'))));
         }
         return { doubled: request.n * 2, pid: process.pid };
       });`,
    );
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const options = (signal?: AbortSignal, stop: 'message' | 'kill' = 'message') => {
    const pids: (number | undefined)[] = [];
    return {
      pids,
      options: {
        entry,
        execArgv: [],
        name: 'the child',
        logger: silentLogger,
        signal,
        stop,
        started: (pid: number | undefined) => pids.push(pid),
      },
    };
  };

  it('runs the request in a child process and resolves with its result', async () => {
    const { pids, options: o } = options();
    const result = await runChild<{ doubled: number; pid: number }>(o, { n: 21 });
    expect(result.doubled).toBe(42);
    expect(result.pid).not.toBe(process.pid);
    expect(pids).toEqual([result.pid]);
  });

  it("with stop 'message', an abort asks the child to stop, and the child's outcome settles the call", async () => {
    const controller = new AbortController();
    const { options: o } = options(controller.signal);
    const running = runChild(o, { n: 1, wait: true });
    setTimeout(() => controller.abort(new Error('the caller gave up')), 300);
    await expect(running).rejects.toThrow('stopped by its parent, cleaned up');
  });

  it.each(['message', 'kill'] as const)(
    'with stop "%s" and a signal aborted before it starts: no child, the reason',
    async (stop) => {
      const { pids, options: o } = options(AbortSignal.abort(new Error('stopped before it began')), stop);
      await expect(runChild(o, { n: 1, wait: true })).rejects.toThrow('stopped before it began');
      expect(pids).toEqual([]);
    },
  );
});
