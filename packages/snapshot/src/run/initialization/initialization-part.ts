import { checkLocalDir, type MemberArgs, memberOptions, memberSettings } from '@etcd-steward/core/cli';
import { UsageError } from '@etcd-steward/core/common';
import { clusterMembers } from '@etcd-steward/core/etcd';
import type { SidecarPart } from '../sidecar-part.js';
import type { InitializerOptions } from './initialization.js';

export interface InitializationArgs extends MemberArgs {
  initialization: boolean;
  'data-dir'?: string;
}

/** ebr's /initialization/start and /status, for etcd-wrapper: the data dir checked, and restored if bad. */
export const initializationPart: SidecarPart<InitializationArgs> = {
  name: 'initialization',
  heading: 'Initialization',
  options: (y) =>
    memberOptions(y)
      .option('initialization', {
        type: 'boolean',
        default: true,
        describe:
          'Serve /initialization/start and /initialization/status, which etcd-wrapper calls before it starts etcd (--no-initialization: neither)',
      })
      .option('data-dir', {
        type: 'string',
        describe:
          "etcd's data dir, as ebr's --data-dir: /initialization/start checks it and, when it is bad, restores it from --store for the member the member flags describe (a single member). Without it, initialization answers Failed",
      }),

  async configure(args, base) {
    if (!args.initialization) return undefined;
    const dataDir = args['data-dir'];
    let initialization: InitializerOptions['initialization'];
    if (dataDir !== undefined) {
      const member = memberSettings(args);
      if (clusterMembers(member.initialCluster).length > 1) {
        throw new UsageError(
          "--initial-cluster names several members: the sidecar's initialization restores a single member only; run etcd-validate bootstrap as the init container instead (it rejoins a cluster), and leave --data-dir off here",
        );
      }
      await checkLocalDir(dataDir, '--data-dir');
      initialization = { dataDir, member };
    }
    return async (_assembly, context) => {
      const { bootstrapInitializer, Initialization } = await import('./initialization.js');
      return [
        new Initialization(
          bootstrapInitializer(
            {
              initialization,
              store: base.storeUrl,
              encryptionKeyFile: base.encryptionKeyFile,
              connection: base.connection,
            },
            context.logger,
          ),
          context,
        ),
      ];
    };
  },
};
