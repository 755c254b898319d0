import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Logger } from '@etcd-steward/core';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type Component, type ComponentContext, startAll, stopAll } from './components.js';
import { GarbageCollectorComponent } from './garbage-collector.js';
import { HttpServer } from './http-server.js';
import { bootstrapInitializer, Initialization } from './initialization.js';
import { openSidecarStore } from './late-store.js';
import { LeaderForward } from './leader-forward.js';
import { Leadership } from './leadership.js';
import { clearScratchDir } from './scratch-dir.js';
import type { SidecarConfig } from './sidecar-config.js';
import { SnapshotterComponent } from './snapshotter-component.js';
import { Spool } from './spool.js';

/** How long shutdown waits for the watch to deliver etcd's last revisions before the last delta. */
const CATCH_UP_MS = 10_000;
const STATUS_TIMEOUT_MS = 5_000;

/**
 * `etcd-snapshot run`: the long-running sidecar next to an etcd member. It assembles the components the flags
 * switch on, runs them until SIGTERM, then stops them in reverse order (the snapshotter's last delta and
 * final snapshot happen there).
 */
export async function runSidecar(config: SidecarConfig, { logger, signal }: { logger: Logger; signal: AbortSignal }) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const context: ComponentContext = { registry, logger };
  const store = await openSidecarStore(config.storeUrl, logger, { encryptionKeyFile: config.encryptionKeyFile });
  const spool = await Spool.open(config.spoolDir, config.spoolMaxBytes);
  await clearScratchDir(config.tempDir);

  const leadership = new Leadership(
    { connection: config.connection, periodMs: config.reelectionPeriodMs, timeoutMs: STATUS_TIMEOUT_MS },
    context,
  );
  const components: Component[] = [leadership];
  if (config.snapshotter) {
    const forward = new LeaderForward(leadership, {
      serverPort: config.server?.port ?? 0,
      tls: config.server?.tls !== undefined,
      ca: config.connection.cacert ? readFileSync(config.connection.cacert) : undefined,
      clientCertificate: config.server?.tls?.clientCa && { cert: config.server.tls.cert, key: config.server.tls.key },
    });
    components.push(
      new SnapshotterComponent(
        {
          connection: config.connection,
          store,
          spool,
          schedule: config.schedule,
          deltaPeriodMs: config.deltaPeriodMs,
          memoryLimit: config.memoryLimit,
          compression: config.compression,
          tempDir: config.tempDir,
          deltaUploadTimeoutMs: config.deltaUploadTimeoutMs,
          leadership,
          finalSnapshot: config.finalSnapshot,
          handoverDelayMs: config.handoverDelayMs,
          catchUpMs: CATCH_UP_MS,
          forward,
          storePrefix: config.storePrefix,
          incompleteUploadMaxAgeMs: config.incompleteUploadMaxAgeMs,
        },
        context,
      ),
    );
  }
  if (config.garbageCollection) {
    components.push(
      new GarbageCollectorComponent(
        { store, leadership, ...config.garbageCollection, incompleteUploadMaxAgeMs: config.incompleteUploadMaxAgeMs },
        context,
      ),
    );
  }
  components.push(new Initialization(bootstrapInitializer({ ...config, store: config.storeUrl }, logger), context));
  if (config.server) {
    const routes = components.flatMap((c) => c.routes ?? []);
    const healthy = () => components.every((c) => c.healthy?.() ?? true);
    components.push(new HttpServer(config.server, routes, healthy, context));
  }

  try {
    await startAll(components, logger);
    if (!signal.aborted) await once(signal, 'abort');
  } finally {
    await stopAll(components, logger);
    spool.close();
    await store.close?.();
    await rm(config.tempDir, { recursive: true, force: true });
    logger.info('stopped');
  }
}
