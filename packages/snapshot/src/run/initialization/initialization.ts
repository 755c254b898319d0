import { errorMessage, type Logger, OperationError, UsageError } from '@etcd-steward/core/common';
import { type EtcdConnection, type MemberConfig, memberStatus } from '@etcd-steward/core/etcd';
import type { ValidationMode } from '@etcd-steward/core/validation';
import type { Component, ComponentContext, Route } from '../component.js';

/** ebr's initialization states, as /initialization/status answers them (plain text). */
export type InitializationStatus = 'New' | 'Progress' | 'Successful' | 'Failed';

/** Checks (and if need be restores) etcd's data dir before etcd starts. */
export type Initializer = (mode: ValidationMode, failBelowRevision?: number) => Promise<void>;

export interface InitializerOptions {
  /** Undefined without --data-dir: then every initialization fails. */
  initialization?: { dataDir: string; member: MemberConfig };
  store: string;
  encryptionKeyFile?: string;
  connection: EtcdConnection;
}

/**
 * ebr's initializer, as etcd-validate bootstrap does it for a single member (docs/validate.md, Bootstrap): the
 * data dir checked in the mode asked, and when it is bad, moved aside and restored from the store. It fails
 * (so etcd-wrapper does not start etcd) when the data is bad and cannot be restored, when there is no
 * --data-dir to check, and when etcd already runs: a running etcd's data dir must not be checked or replaced.
 */
export const bootstrapInitializer =
  (options: InitializerOptions, logger: Logger): Initializer =>
  async (mode, failBelowRevision) => {
    if (!options.initialization) {
      throw new UsageError(
        "the sidecar has no --data-dir: give it etcd's data dir so that initialization can check it",
      );
    }
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
      ...options.initialization,
      store: options.store,
      encryptionKeyFile: options.encryptionKeyFile,
      mode,
      failBelowRevision,
      namespace: process.env.POD_NAMESPACE,
      logger,
    });
    if (result.exitCode !== 0) throw new OperationError(`etcd must not start (${result.case}): ${result.reason}`);
    logger.info('initialization done', { case: result.case, steps: result.steps });
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
    context: ComponentContext,
  ) {
    this.logger = context.logger;
    this.routes = [
      {
        path: '/initialization/start',
        methods: ['GET', 'POST'],
        query: ['mode', 'failbelowrevision'],
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
        handle: async () => {
          const status = this.status;
          if (status === 'Successful' || status === 'Failed') this.status = 'New';
          return { status: 200, body: status };
        },
      },
    ];
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}

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
