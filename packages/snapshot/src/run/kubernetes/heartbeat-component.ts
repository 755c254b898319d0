import type { PodIdentity } from '@etcd-steward/core/kubernetes';
import type { Component } from '../component.js';
import type { Leadership } from '../leadership/leadership.js';
import type { KubeClient } from './kube-client.js';
import type { KubePublisher } from './kube-publisher.js';

export interface HeartbeatOptions {
  client: KubeClient;
  publisher: KubePublisher;
  leadership: Leadership;
  pod: PodIdentity;
  heartbeatMs: number;
}

/**
 * A Kubernetes object this member keeps current, as ebr's heartbeat does: written at start, at once when the
 * member's role changes, and every `--k8s-heartbeat-duration`. Subclasses say what to write (`beat`).
 */
export abstract class HeartbeatComponent implements Component {
  abstract readonly name: string;
  private timer?: NodeJS.Timeout;
  private unsubscribe?: () => void;

  constructor(protected readonly options: HeartbeatOptions) {}

  async start(): Promise<void> {
    this.unsubscribe = this.options.leadership.onChange(() => this.beat());
    this.beat();
    this.timer = setInterval(() => this.beat(), this.options.heartbeatMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  /** Queues this member's write with the publisher (which keeps the newest and retries): never throws. */
  protected abstract beat(): void;
}
