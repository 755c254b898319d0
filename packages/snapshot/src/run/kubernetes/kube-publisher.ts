import { Backoff, errorMessage, type Logger } from '@etcd-steward/core/common';
import { Counter, Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';

/** One write to the API server; it resolves whether or not anything needed writing. */
export type KubeWrite = (onConflict: () => void) => Promise<void>;

/** How long one write may take before it counts as failed (the client has no timeout of its own). */
const WRITE_TIMEOUT_MS = 10_000;
/** At stop, how long the writes still queued (the final snapshot's lease) may take. */
const STOP_GRACE_MS = 5_000;

/**
 * The sidecar's writes to Kubernetes (leases, EtcdMember status), off the path of the snapshots: a write is
 * queued under the name of its object and done in the background, the newest per object only. While the API
 * server fails, the outage is logged once and the newest writes retried with backoff; nothing waits on it.
 */
export class KubePublisher implements Component {
  readonly name = 'kubernetes-publisher';
  private readonly logger: Logger;
  private readonly pending = new Map<string, KubeWrite>();
  private readonly updates: Counter<'object' | 'succeeded'>;
  private readonly conflicts: Counter<'object'>;
  private readonly reachableGauge: Gauge;
  private readonly backoff = new Backoff({ baseDelayMs: 500, maxDelayMs: 30_000 });
  private readonly controller = new AbortController();
  private running?: Promise<void>;
  private reachable = true;
  private stopping = false;

  constructor(context: ComponentContext) {
    this.logger = context.logger;
    const registers = [context.registry];
    this.updates = new Counter({
      name: 'etcd_snapshot_k8s_updates_total',
      help: 'Writes of Kubernetes objects (member lease, snapshot leases, EtcdMember status), by object and outcome.',
      labelNames: ['object', 'succeeded'],
      registers,
    });
    this.conflicts = new Counter({
      name: 'etcd_snapshot_k8s_conflicts_total',
      help: 'Writes that met a newer version of their object (409), re-read and retried.',
      labelNames: ['object'],
      registers,
    });
    this.reachableGauge = new Gauge({
      name: 'etcd_snapshot_k8s_reachable',
      help: "1 while the Kubernetes API server accepts the sidecar's writes, 0 while they fail.",
      registers,
    });
    this.reachableGauge.set(1);
  }

  async start(): Promise<void> {}

  /** Finishes the queued writes, tried once more each, for at most STOP_GRACE_MS. */
  async stop(): Promise<void> {
    this.stopping = true;
    const grace = setTimeout(() => this.controller.abort(), STOP_GRACE_MS);
    await this.running;
    clearTimeout(grace);
    this.controller.abort();
  }

  /** Queues `write` for `object`, in place of any older write for it not yet done. */
  publish(object: string, write: KubeWrite): void {
    if (this.controller.signal.aborted) return;
    this.pending.set(object, write);
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
    });
  }

  private async drain(): Promise<void> {
    while (this.pending.size > 0 && !this.controller.signal.aborted) {
      const [object, write] = this.pending.entries().next().value as [string, KubeWrite];
      this.pending.delete(object);
      try {
        await withTimeout(
          write(() => this.conflicts.inc({ object })),
          WRITE_TIMEOUT_MS,
          this.controller.signal,
        );
        this.updates.inc({ object, succeeded: 'true' });
        this.noteReachable(true, '');
        this.backoff.reset();
      } catch (err) {
        this.updates.inc({ object, succeeded: 'false' });
        this.noteReachable(false, `${object}: ${errorMessage(err)}`);
        if (this.stopping) continue;
        // A newer write for the object, queued meanwhile, replaces this one.
        if (!this.pending.has(object)) this.pending.set(object, write);
        await this.backoff.wait(this.controller.signal).catch(() => undefined);
      }
    }
  }

  private noteReachable(reachable: boolean, reason: string): void {
    if (reachable === this.reachable) return;
    this.reachable = reachable;
    this.reachableGauge.set(reachable ? 1 : 0);
    if (reachable) this.logger.info('the Kubernetes API server accepts updates again');
    else this.logger.warn('cannot update Kubernetes objects; retrying with backoff (snapshots go on)', { reason });
  }
}

/** `work`, or a rejection after `ms` or when `signal` aborts (the request itself is left to end on its own). */
async function withTimeout<T>(work: Promise<T>, ms: number, signal: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000}s`)), ms);
    onAbort = () => reject(new Error('the sidecar stops'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}
