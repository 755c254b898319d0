import { once } from 'node:events';
import type { Logger } from '@etcd-steward/core/common';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type Component, type ComponentContext, startAll, stopAll } from './component.js';
import { openSidecarStore } from './late-store.js';
import { Leadership } from './leadership/leadership.js';
import { Serial } from './serial.js';
import type { SidecarConfig } from './sidecar-config.js';
import type { Assembly } from './sidecar-part.js';

const STATUS_TIMEOUT_MS = 5_000;

/**
 * `etcd-snapshot run`: the long-running sidecar next to an etcd member. It builds the parts the flags switch on
 * (parts.ts), each on a metrics registry of its own, runs their components until SIGTERM, then stops them in
 * reverse order (the snapshotter's last delta and final snapshot happen there).
 */
export async function runSidecar(config: SidecarConfig, { logger, signal }: { logger: Logger; signal: AbortSignal }) {
  const { base } = config;
  const processMetrics = new Registry();
  collectDefaultMetrics({ register: processMetrics });
  const registries = [processMetrics];
  const contextOf = (): ComponentContext => {
    const registry = new Registry();
    registries.push(registry);
    return { registry, logger };
  };
  const store = await openSidecarStore(base.storeUrl, logger, { encryptionKeyFile: base.encryptionKeyFile });
  const leadership = new Leadership(
    { connection: base.connection, periodMs: base.reelectionPeriodMs, timeoutMs: STATUS_TIMEOUT_MS },
    contextOf(),
  );
  const early: Component[] = [];
  const rest: Component[] = [];
  const components = (): Component[] => [leadership, ...early, ...rest];
  const assembly: Assembly = {
    base,
    store,
    leadership,
    maintenance: new Serial(),
    routes: () => components().flatMap((c) => c.routes ?? []),
    healthy: () => components().every((c) => c.healthy?.() ?? true),
    metrics: () => Registry.merge(registries),
  };
  try {
    for (const part of config.parts) {
      const built = await part.build(assembly, contextOf());
      (part.startsEarly ? early : rest).push(...built);
    }
    await startAll(components(), logger);
    if (!signal.aborted) await once(signal, 'abort');
  } finally {
    await stopAll(components(), logger);
    await store.close?.();
    logger.info('stopped');
  }
}
