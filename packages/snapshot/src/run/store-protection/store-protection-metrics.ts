import { errorMessage, type Logger } from '@etcd-steward/core/common';
import { type SnapStore, type StoreProtection, storeProtection } from '@etcd-steward/core/store';
import { Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';
import { LateStore } from '../late-store.js';

export interface StoreProtectionOptions {
  store: SnapStore;
  /** 0: read once, at start. */
  periodMs: number;
  required: boolean;
}

/**
 * `--store-protection-period`: the store's protection (core's storeProtection), read at start and every period, on
 * every sidecar, logged when it changes and published as metrics: whether the store is immutable, whether that is
 * required (for the alert EtcdBackupStoreNotImmutable), and its versioning. Until it reads, the metrics are absent.
 */
export class StoreProtectionMetrics implements Component {
  readonly name = 'store-protection';
  private readonly logger: Logger;
  private protection?: StoreProtection;
  private timer?: NodeJS.Timeout;
  private reading?: Promise<void>;
  private failing = false;

  constructor(
    private readonly options: StoreProtectionOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    const registers = [context.registry];
    const protection = () => this.protection;
    new Gauge({
      name: 'etcd_snapshot_store_immutable',
      help: 'Whether the store is immutable: S3 versioning with Object Lock and a default retention, a GCS retention policy (1), or not (0); absent until read.',
      registers,
      collect() {
        const p = protection();
        this.reset();
        if (p) this.set(p.immutable ? 1 : 0);
      },
    });
    new Gauge({
      name: 'etcd_snapshot_store_immutable_required',
      help: 'Whether --require-immutable-store asks for an immutable store (1) or not (0).',
      registers,
      collect() {
        this.set(options.required ? 1 : 0);
      },
    });
    new Gauge({
      name: 'etcd_snapshot_store_versioning',
      help: 'Whether the store keeps older versions of overwritten and deleted snapshots (1: on or suspended), or not (0); absent until read or where the provider does not say.',
      registers,
      collect() {
        const p = protection();
        this.reset();
        if (p && p.versioning !== 'unknown') this.set(p.versioning === 'off' ? 0 : 1);
      },
    });
  }

  async start(): Promise<void> {
    const tick = () => {
      this.reading ??= this.read().finally(() => {
        this.reading = undefined;
      });
    };
    tick();
    if (this.options.periodMs > 0) this.timer = setInterval(tick, this.options.periodMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.reading;
  }

  private async read(): Promise<void> {
    try {
      // a store opened late is asked once it answers
      const store = this.options.store instanceof LateStore ? await this.options.store.store() : this.options.store;
      const now = await storeProtection(store);
      const changed = now.summary !== this.protection?.summary;
      this.protection = now;
      this.failing = false;
      if (!changed) return;
      const fields = {
        store: store.location,
        versioning: now.versioning,
        ...(now.objectLock ? { objectLock: now.objectLock } : {}),
        ...(now.retentionPolicy ? { retentionPolicy: now.retentionPolicy } : {}),
        immutable: now.immutable,
        ...(now.unknown ? { unknown: now.unknown } : {}),
      };
      if (this.options.required && !now.immutable) {
        this.logger.error(`store protection: ${now.summary}, but --require-immutable-store asks for immutable`, fields);
      } else this.logger.info(`store protection: ${now.summary}`, fields);
    } catch (err) {
      if (!this.failing) this.logger.warn("cannot read the store's protection", { reason: errorMessage(err) });
      this.failing = true;
    }
  }
}
