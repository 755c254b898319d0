import { parentLogger } from '../common/child-process.js';
import { errorMessage } from '../common/errors.js';
import { type ChainReplayResult, replayChain } from '../replay/replay-chain.js';
import { openStore } from '../store/location.js';
import type { ChildMessage, IsolatedReplayRequest } from './isolated-replay.js';
import { createReplayEngine } from './replay-method.js';

// The child side of isolated-replay.ts: one chain replayed, its outcome sent back.
const logger = parentLogger();
const controller = new AbortController();
let finished = false;
// Without its parent nobody waits for the result: stop (the exit handlers stop a private etcd too).
process.on('disconnect', () => {
  if (!finished) process.exit(1);
});
process.on('message', (m: { type: string; request?: IsolatedReplayRequest }) => {
  if (m.type === 'abort') controller.abort(new Error('stopped'));
  if (m.type === 'start' && m.request) void run(m.request);
});

async function run(request: IsolatedReplayRequest): Promise<void> {
  let outcome: ChildMessage;
  try {
    const store = await openStore(request.storeUrl, { encryptionKeyFile: request.encryptionKeyFile });
    const result: ChainReplayResult = await replayChain({
      store,
      chain: request.chain,
      toRevision: request.toRevision,
      workDir: request.workDir,
      engine: createReplayEngine(request.method, {
        binaries: request.binaries,
        workDir: request.engineDir,
        limits: request.limits,
        leaseTtl: request.leaseTtl,
        logger,
      }),
      maxFetchers: request.maxFetchers,
      allowPartial: request.allowPartial,
      inPlace: request.inPlace,
      logger,
      signal: controller.signal,
    });
    await store.close?.();
    outcome = { type: 'done', result, peakRssBytes: process.resourceUsage().maxRSS * 1024 };
  } catch (err) {
    outcome = { type: 'failed', name: (err as Error)?.name ?? 'Error', message: errorMessage(err) };
  }
  finished = true;
  process.send!(outcome, () => process.disconnect());
}
