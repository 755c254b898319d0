import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage, type Logger, UsageError } from '@etcd-steward/core/common';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import { Counter, type Registry } from 'prom-client';

/** Who to promote: the member an initialization added as a learner. */
export interface LearnerToPromote {
  name: string;
  initialAdvertisePeerUrls: string;
}

/** How long one promotion keeps asking before it gives up and starts over (etcd-wrapper may take a while). */
const ROUND_MS = 10 * 60_000;
/** The wait after a round that ended without an answer. */
const RETRY_MS = 5_000;

/**
 * Makes the learner that this sidecar's initialization added a voting member, as ebr does: etcd-wrapper starts
 * etcd after initialization, so this asks the cluster (bootstrap's promoteLearner: etcd refuses until the
 * learner's log has caught up) in the background until etcd agrees or the sidecar stops. A member that already
 * votes is left as it is, and one not in the member list is not waited for. Also asked at the sidecar's start,
 * for a learner whose promotion a restart of the sidecar cut short. Says so in the log and in
 * `etcd_snapshot_learner_promotions_total`.
 */
export class LearnerPromotion {
  private readonly promotions: Counter;
  private readonly controller = new AbortController();
  private running?: Promise<void>;

  constructor(
    private readonly connection: EtcdConnection,
    registry: Registry,
    private readonly logger: Logger,
  ) {
    this.promotions = new Counter({
      name: 'etcd_snapshot_learner_promotions_total',
      help: 'Learners this sidecar added at initialization and then promoted to voting members',
      registers: [registry],
    });
  }

  /** Starts promoting `member` (once: a promotion under way is not started twice). */
  promote(member: LearnerToPromote, connection: EtcdConnection = this.connection): void {
    if (this.running) return;
    this.running = this.loop(member, connection).finally(() => {
      this.running = undefined;
    });
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.running;
  }

  private async loop(member: LearnerToPromote, connection: EtcdConnection): Promise<void> {
    const { promoteLearner } = await import('@etcd-steward/core/bootstrap');
    const { signal } = this.controller;
    while (!signal.aborted) {
      try {
        const { id, promoted } = await promoteLearner({
          connection,
          member,
          timeoutMs: ROUND_MS,
          logger: this.logger,
          signal,
        });
        if (promoted) this.promotions.inc();
        else this.logger.info('the member already votes: nothing to promote', { member: member.name, id });
        return;
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof UsageError) {
          // not in the member list (yet): the next initialization adds it and asks again
          this.logger.info('this member is not in the cluster: nothing to promote', { member: member.name });
          return;
        }
        this.logger.warn('the learner is not promoted yet; trying again', {
          member: member.name,
          reason: errorMessage(err),
        });
        await sleep(RETRY_MS, undefined, { signal }).catch(() => undefined);
      }
    }
  }
}
