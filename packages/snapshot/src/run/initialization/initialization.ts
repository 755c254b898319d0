import { errorMessage, type Logger, OperationError } from '@etcd-steward/core/common';
import { type EtcdConnection, memberList, memberStatus } from '@etcd-steward/core/etcd';
import type { ValidationMode } from '@etcd-steward/core/validation';
import type { Component, ComponentContext, Route } from '../component.js';
import { type InitializationSettings, initializationTarget } from './initialization-target.js';
import type { LearnerPromotion } from './learner-promotion.js';

/** ebr's initialization states, as /initialization/status answers them (plain text). */
export type InitializationStatus = 'New' | 'Progress' | 'Successful' | 'Failed';

/** Checks (and if need be restores) etcd's data dir before etcd starts. */
export type Initializer = (mode: ValidationMode, failBelowRevision?: number) => Promise<void>;

export interface InitializerOptions {
  initialization: InitializationSettings & { startEmptyWithoutBackup: boolean };
  store: string;
  encryptionKeyFile?: string;
  connection: EtcdConnection;
}

/**
 * ebr's initializer, as etcd-validate bootstrap decides it (docs/validate.md, Bootstrap), for the member that
 * druid's etcd config file names for this pod (else the member flags): the data dir checked in the mode asked;
 * when it is bad, restored from the store (one member, or a whole cluster lost) or rejoined to the cluster as a
 * learner, which is then promoted once its etcd runs. It fails (so etcd-wrapper does not start etcd) when the
 * data is bad and cannot be restored, when there is no data dir to check, and when etcd already runs: a running
 * etcd's data dir must not be checked or replaced.
 */
export const bootstrapInitializer =
  (options: InitializerOptions, promotion: LearnerPromotion, logger: Logger): Initializer =>
  async (mode, failBelowRevision) => {
    const target = await initializationTarget(options.initialization);
    const running = await memberStatus(options.connection, { timeoutMs: 1_000 }).then(
      () => true,
      () => false,
    );
    if (running) {
      throw new OperationError(
        `etcd answers at ${options.connection.endpoints[0]}: initialization checks the data dir before etcd starts, not while it runs`,
      );
    }
    // Loaded when asked for: bootstrap brings restore, replay and validation, which a sidecar need not hold otherwise.
    const { bootstrap } = await import('@etcd-steward/core/bootstrap');
    const result = await bootstrap({
      ...target,
      store: options.store,
      encryptionKeyFile: options.encryptionKeyFile,
      startEmptyWithoutBackup: options.initialization.startEmptyWithoutBackup,
      mode,
      failBelowRevision,
      namespace: process.env.POD_NAMESPACE,
      logger,
    });
    if (result.exitCode !== 0) throw new OperationError(`etcd must not start (${result.case}): ${result.reason}`);
    logger.info('initialization done', { case: result.case, steps: result.steps });
    if (target.cluster && result.learnerId) {
      promotion.promote(target.member, {
        ...target.cluster,
        endpoints: [...options.connection.endpoints, ...target.cluster.endpoints],
      });
    }
  };

/** /config: druid's etcd config file rendered for this pod and the cluster as it is (docs/etcd-wrapper.md). */
export const servedConfig = (settings: InitializationSettings) => async (): Promise<string> => {
  const { etcdConfigForPod } = await import('@etcd-steward/core/bootstrap');
  const served = await etcdConfigForPod({
    path: settings.etcdConfigFile,
    podName: process.env.POD_NAME ?? '',
    connection: { ...settings.connection, endpoints: settings.serviceEndpoints },
  });
  return served.text;
};

/**
 * ebr's `/initialization/start` and `/initialization/status` pair, for etcd-wrapper: start moves New to
 * Progress and runs the initializer; status reports the state, and once it has reported Successful or Failed
 * the state goes back to New, as in ebr.
 */
export class Initialization implements Component {
  readonly name = 'initialization';
  readonly routes: readonly Route[];
  private status: InitializationStatus = 'New';
  private readonly logger: Logger;

  constructor(
    private readonly initializer: Initializer,
    private readonly config: () => Promise<string>,
    private readonly promotion: LearnerPromotion,
    context: ComponentContext,
    /** At start: a learner of this pod left unpromoted by a restart of the sidecar is promoted. */
    private readonly resume?: () => Promise<void>,
  ) {
    this.logger = context.logger;
    this.routes = [
      {
        path: '/config',
        methods: ['GET'],
        podLocal: true,
        handle: async () => {
          try {
            return { status: 200, body: await this.config(), headers: { 'content-type': 'application/yaml' } };
          } catch (err) {
            this.logger.warn('cannot serve the etcd config', { reason: errorMessage(err) });
            return { status: 500, body: { error: errorMessage(err) } };
          }
        },
      },
      {
        path: '/initialization/start',
        methods: ['GET', 'POST'],
        query: ['mode', 'failbelowrevision'],
        podLocal: true,
        handle: async (_request, query) => {
          const mode = query.get('mode') ?? 'full';
          if (mode !== 'full' && mode !== 'sanity')
            return { status: 400, body: { error: 'mode must be full or sanity' } };
          const below = query.get('failbelowrevision');
          if (below !== null && !/^\d{1,19}$/.test(below)) {
            return { status: 400, body: { error: 'failbelowrevision must be a revision number' } };
          }
          this.begin(mode, below === null ? undefined : Number(below));
          return { status: 200 };
        },
      },
      {
        path: '/initialization/status',
        methods: ['GET'],
        podLocal: true,
        handle: async () => {
          const status = this.status;
          if (status === 'Successful' || status === 'Failed') this.status = 'New';
          return { status: 200, body: status };
        },
      },
    ];
  }

  async start(): Promise<void> {
    this.resume?.().catch((err) =>
      this.logger.warn('cannot look for a learner to promote', { reason: errorMessage(err) }),
    );
  }

  async stop(): Promise<void> {
    await this.promotion.stop();
  }

  private begin(mode: ValidationMode, failBelowRevision?: number): void {
    if (this.status !== 'New') return;
    this.status = 'Progress';
    this.initializer(mode, failBelowRevision).then(
      () => {
        this.status = 'Successful';
      },
      (err) => {
        this.logger.error('initialization failed', { reason: errorMessage(err) });
        this.status = 'Failed';
      },
    );
  }
}

/**
 * The promotion resumed at the sidecar's start, for a learner whose promotion a restart of the sidecar cut short:
 * with several members in druid's config file (or the member flags), the first member that answers is asked for
 * its member list once; if it lists this pod's member as a learner, the promotion starts.
 */
export const resumePromotion =
  (settings: InitializationSettings, promotion: LearnerPromotion, connection: EtcdConnection) =>
  async (): Promise<void> => {
    const target = await initializationTarget(settings).catch(() => undefined);
    if (!target?.cluster) return;
    const cluster = { ...target.cluster, endpoints: [...connection.endpoints, ...target.cluster.endpoints] };
    // etcd's member list, not bootstrap's probe: bootstrap is loaded only when an initialization asks for it
    const peers = target.member.initialAdvertisePeerUrls.split(',').map((u) => u.trim());
    for (const endpoint of cluster.endpoints) {
      const members = await memberList(cluster, { endpoint, timeoutMs: 2_000 }).catch(() => undefined);
      if (!members) continue;
      const self = members.find(
        (m) => (m.name !== '' && m.name === target.member.name) || m.peerUrls.some((u) => peers.includes(u)),
      );
      if (self?.isLearner) promotion.promote(target.member, cluster);
      return;
    }
  };
