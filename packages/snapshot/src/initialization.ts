import { errorMessage, type Logger } from '@etcd-steward/core';
import type { Component, ComponentContext, Route } from './components.js';

/** ebr's initialization states, as /initialization/status answers them (plain text). */
export type InitializationStatus = 'New' | 'Progress' | 'Successful' | 'Failed';

export type ValidationMode = 'full' | 'sanity';

/** Checks (and if need be restores) etcd's data dir before etcd starts. */
export type Initializer = (mode: ValidationMode, failBelowRevision?: number) => Promise<void>;

/**
 * Data-dir validation is etcd-validate's job, run as an init container before etcd starts; the sidecar does
 * not validate. Until etcd-validate can be called from here, a start request reports success at once, so
 * that etcd-wrapper (which polls these endpoints before it starts etcd) goes on. See docs/sidecar.md.
 */
export const delegatedInitializer =
  (logger: Logger): Initializer =>
  async (mode) => {
    logger.warn(
      "initialization requested, but data-dir validation is etcd-validate's job (an init container); reporting Successful",
      {
        mode,
      },
    );
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
        acts: true,
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
        acts: true,
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
