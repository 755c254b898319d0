import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Logger } from '@etcd-steward/core/common';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { AlarmsComponent } from './alarms-component.js';
import { type Component, type ComponentContext, startAll, stopAll } from './components.js';
import { DefragmentationComponent } from './defragmentation-component.js';
import { GarbageCollectorComponent } from './garbage-collector.js';
import { HttpServer } from './http-server.js';
import { bootstrapInitializer, Initialization } from './initialization.js';
import { openSidecarStore } from './late-store.js';
import { LeaderForward } from './leader-forward.js';
import { Leadership } from './leadership.js';
import { clearScratchDir } from './scratch-dir.js';
import { Serial } from './serial.js';
import { registerSettingsMetrics } from './settings-metrics.js';
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
  let snapshotter: SnapshotterComponent | undefined;
  if (config.snapshotter) {
    registerSettingsMetrics(registry, config);
    const forward = new LeaderForward(leadership, {
      serverPort: config.server?.port ?? 0,
      tls: config.server?.tls !== undefined,
      ca: config.connection.cacert ? readFileSync(config.connection.cacert) : undefined,
      clientCertificate: config.server?.tls?.clientCa && { cert: config.server.tls.cert, key: config.server.tls.key },
      maxInFlight: config.server?.maxForwarded ?? 0,
    });
    snapshotter = new SnapshotterComponent(
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
    );
    components.push(snapshotter);
  }
  // Scheduled defragmentation and NOSPACE recovery both defragment: on this sidecar, one after the other.
  const maintenance = new Serial();
  if (config.defragmentation) {
    const { fullSnapshotAfter, ...defragmentation } = config.defragmentation;
    const afterRun = async () => {
      if (!snapshotter?.leading) return;
      const saved = await snapshotter.full(false);
      logger.info('full snapshot after defragmentation', { snapshot: saved.ref.name });
    };
    components.push(
      new DefragmentationComponent(
        {
          connection: config.connection,
          leadership,
          maintenance,
          ...defragmentation,
          afterRun: fullSnapshotAfter ? afterRun : undefined,
        },
        context,
      ),
    );
  }
  if (config.alarms) {
    components.push(
      new AlarmsComponent(
        {
          connection: config.connection,
          leadership,
          maintenance,
          ...config.alarms,
          neededRevision: () => snapshotter?.neededRevision,
        },
        context,
      ),
    );
  }
  // Right after the leadership: they stop after the snapshotter, so that its final snapshot renews the lease.
  if (config.kubernetes) {
    components.splice(1, 0, ...(await kubernetesComponents(config.kubernetes, leadership, snapshotter, context)));
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

/** The publisher first, so that it stops last, after the components that feed it. */
async function kubernetesComponents(
  config: NonNullable<SidecarConfig['kubernetes']>,
  leadership: Leadership,
  snapshotter: SnapshotterComponent | undefined,
  context: ComponentContext,
): Promise<Component[]> {
  const { KubePublisher } = await import('./kube-publisher.js');
  const publisher = new KubePublisher(context);
  const { client, pod, heartbeatMs } = config;
  const components: Component[] = [publisher];
  if (config.memberLease) {
    const { MemberLeaseRenewal } = await import('./member-lease-renewal.js');
    components.push(new MemberLeaseRenewal({ client, publisher, leadership, pod, heartbeatMs }));
  }
  if (config.snapshotLeases && snapshotter) {
    const { SnapshotLeaseRenewal } = await import('./snapshot-lease-renewal.js');
    components.push(
      new SnapshotLeaseRenewal({
        client,
        publisher,
        snapshots: snapshotter.metrics,
        namespace: pod.namespace,
        names: config.snapshotLeases,
      }),
    );
  }
  if (config.etcdMember) {
    const { EtcdMemberStatusPublisher } = await import('./etcd-member-status-publisher.js');
    components.push(new EtcdMemberStatusPublisher({ client, publisher, leadership, pod, heartbeatMs }));
  }
  return components;
}
