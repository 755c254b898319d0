import { serveParent } from '../common/child-thread.js';
import type { ChainSource } from '../replay/chain-source.js';
import { replayChain } from '../replay/replay-chain.js';
import type { SnapStore } from '../store/snapstore.js';
import { chainFromParent } from './chain-feed.js';
import type { IsolatedReplayRequest, ReplayOutcome } from './isolated-replay.js';
import { createReplayEngine } from './replay-method.js';

// The replay thread's side of isolated-replay.ts: one chain replayed, its outcome sent back. Fed by the restore's process,
// it never opens the store (nor loads a store's client or a decompressor).
serveParent(async (request: IsolatedReplayRequest, logger, signal, parent): Promise<ReplayOutcome> => {
  let store: SnapStore | undefined;
  let source: ChainSource;
  if (request.fed) {
    source = chainFromParent(parent, request.storeUrl, request.chain.deltas);
  } else {
    const { openStore } = await import('../store/location.js');
    const { storeSource } = await import('../replay/chain-source.js');
    store = await openStore(request.storeUrl, { encryptionKeyFile: request.encryptionKeyFile });
    source = storeSource(store, {
      chain: request.chain,
      workDir: request.workDir,
      maxFetchers: request.maxFetchers,
      logger,
    });
  }
  try {
    const result = await replayChain({
      source,
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
      allowPartial: request.allowPartial,
      prepare: request.prepare,
      inPlace: request.inPlace,
      logger,
      signal,
    });
    return result;
  } finally {
    await store?.close?.();
  }
});
