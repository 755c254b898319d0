import { DRILL_OUTCOMES, type ProofRecord, readProofRecord } from '@etcd-steward/core/backup';
import { errorMessage, type Logger } from '@etcd-steward/core/common';
import type { SnapStore } from '@etcd-steward/core/store';
import { Counter, Gauge } from 'prom-client';
import type { Component, ComponentContext } from '../component.js';

export interface ProofRecordMetricsOptions {
  store: SnapStore;
  periodMs: number;
}

/**
 * `--proof-record-period`: the restore drill's record (core's backup/proof-record.ts), read from the store every
 * period, on every sidecar (the record is the cluster's, not a member's), as metrics: the newest revision a drill
 * proved and when, the last drill's time and outcome, and the drills that did not prove, by outcome. A record that
 * cannot be read leaves the metrics as they were and is logged once until it reads again.
 */
export class ProofRecordMetrics implements Component {
  readonly name = 'proof-record';
  private readonly logger: Logger;
  private record?: ProofRecord;
  private timer?: NodeJS.Timeout;
  private reading?: Promise<void>;
  private failing = false;

  constructor(
    private readonly options: ProofRecordMetricsOptions,
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    const registers = [context.registry];
    const record = () => this.record;
    new Gauge({
      name: 'etcd_snapshot_backup_proven_revision',
      help: "The newest revision the restore drill proved against the cluster (etcd's HashKV; docs/proof.md); 0 before any.",
      registers,
      collect() {
        this.set(record()?.provenRevision ?? 0);
      },
    });
    new Gauge({
      name: 'etcd_snapshot_backup_proven_timestamp_seconds',
      help: 'When the restore drill last proved a revision (Unix seconds); 0 before any.',
      registers,
      collect() {
        const at = record()?.provenAt;
        this.set(at ? Date.parse(at) / 1000 : 0);
      },
    });
    new Gauge({
      name: 'etcd_snapshot_backup_proof_checked_timestamp_seconds',
      help: 'When the restore drill last ran, whatever its outcome (Unix seconds); 0 before any.',
      registers,
      collect() {
        const at = record()?.checkedAt;
        this.set(at ? Date.parse(at) / 1000 : 0);
      },
    });
    new Gauge({
      name: 'etcd_snapshot_backup_proof_last_outcome',
      help: "The last restore drill's outcome: 1 for it, 0 for the others (proven, mismatch, foreign, unprovable, not-restorable, failed).",
      labelNames: ['outcome'],
      registers,
      collect() {
        const last = record()?.outcome;
        for (const outcome of DRILL_OUTCOMES) this.set({ outcome }, last === outcome ? 1 : 0);
      },
    });
    new Counter({
      name: 'etcd_snapshot_backup_proof_failures_total',
      help: 'Restore drills that did not prove the backups, by outcome, as the drill record counts them.',
      labelNames: ['outcome'],
      registers,
      collect() {
        const failures = record()?.failures ?? {};
        this.reset();
        for (const outcome of DRILL_OUTCOMES) {
          if (outcome !== 'proven') this.inc({ outcome }, failures[outcome] ?? 0);
        }
      },
    });
  }

  /** The record as last read; undefined before a drill wrote one. */
  get latest(): ProofRecord | undefined {
    return this.record;
  }

  async start(): Promise<void> {
    const tick = () => {
      this.reading ??= this.read().finally(() => {
        this.reading = undefined;
      });
    };
    tick();
    this.timer = setInterval(tick, this.options.periodMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.reading;
  }

  private async read(): Promise<void> {
    try {
      this.record = (await readProofRecord(this.options.store)) ?? this.record;
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.logger.warn("cannot read the restore drill's record", { reason: errorMessage(err) });
      this.failing = true;
    }
  }
}
