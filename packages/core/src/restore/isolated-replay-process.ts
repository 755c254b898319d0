import { serveParent } from '../common/child-process.js';
import { replayChain } from '../replay/replay-chain.js';
import { openStore } from '../store/location.js';
import { deltasFromParent } from './delta-feed.js';
import type { IsolatedReplayRequest, ReplayOutcome } from './isolated-replay.js';
import { createReplayEngine } from './replay-method.js';

// The child side of isolated-replay.ts: one chain replayed, its outcome sent back.
serveParent(async (request: IsolatedReplayRequest, logger, signal, parent): Promise<ReplayOutcome> => {
  const store = await openStore(request.storeUrl, { encryptionKeyFile: request.encryptionKeyFile });
  const result = await replayChain({
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
    ...(request.feedDeltas ? { deltaFiles: deltasFromParent(parent, request.chain.deltas) } : {}),
    allowPartial: request.allowPartial,
    inPlace: request.inPlace,
    logger,
    signal,
  });
  await store.close?.();
  return { ...result, peakRssBytes: process.resourceUsage().maxRSS * 1024 };
});
