import { stat } from 'node:fs/promises';
import { checkLocalDir, type MemberArgs, memberOptions, memberSettings } from '@etcd-steward/core/cli';
import { parseEndpoints } from '@etcd-steward/core/etcd';
import type { SidecarPart } from '../sidecar-part.js';
import { distinctMembers, serviceEndpointsNeeded } from './initialization-target.js';

export interface InitializationArgs extends MemberArgs {
  initialization: boolean;
  'data-dir'?: string;
  'etcd-config-file'?: string;
  'service-endpoints'?: string;
  'start-empty-without-backup': boolean;
}

/** Where etcd-druid mounts etcd's config file (core's DRUID_ETCD_CONFIG_PATH; bootstrap is loaded only when asked for). */
const DRUID_ETCD_CONFIG_PATH = '/var/etcd/config/etcd.conf.yaml';

/**
 * What etcd-wrapper asks before it starts etcd (docs/etcd-wrapper.md): ebr's /initialization/start and /status,
 * the data dir checked and restored or rejoined to the cluster, and /config, druid's etcd config file served for
 * this pod; then the promotion of a learner the initialization added.
 */
export const initializationPart: SidecarPart<InitializationArgs> = {
  name: 'initialization',
  heading: 'Initialization',
  options: (y) =>
    memberOptions(y)
      .option('initialization', {
        type: 'boolean',
        default: true,
        describe:
          'Serve /initialization/start, /initialization/status and /config, which etcd-wrapper calls before it starts etcd (--no-initialization: none of them)',
      })
      .option('data-dir', {
        type: 'string',
        describe:
          "etcd's data dir, as ebr's --data-dir: /initialization/start checks it and, when it is bad, restores it from --store or rejoins the cluster (docs/etcd-wrapper.md) [default: the data-dir of --etcd-config-file]",
      })
      .option('etcd-config-file', {
        type: 'string',
        describe:
          "etcd's config file as etcd-druid mounts it: /config serves it for this pod (POD_NAME), and initialization takes the member from it; without the file, the member flags [default: ETCD_CONF (ebr's variable), else /var/etcd/config/etcd.conf.yaml]",
      })
      .option('service-endpoints', {
        type: 'string',
        describe:
          "Client URLs that reach the cluster's members (ebr's flag; druid gives the client Service): initialization and /config ask the cluster there [default: every member's client URL in --etcd-config-file]",
      })
      .option('start-empty-without-backup', {
        type: 'boolean',
        default: false,
        describe:
          "ebr's behaviour: when the data is bad and the store holds no backup, move the data aside and let etcd start empty, instead of answering Failed (docs/moving-from-ebr.md, What differs)",
      }),

  async configure(args, base) {
    if (!args.initialization) return undefined;
    const dataDir = args['data-dir'];
    if (dataDir !== undefined) await checkLocalDir(dataDir, '--data-dir');
    const raw = args['service-endpoints'];
    const serviceEndpoints = raw ? parseEndpoints(raw) : undefined;
    const member = memberSettings(args);
    // ebr's ETCD_CONF names another file, as for the member lease (core's kubernetes/member-lease-identity.ts)
    const etcdConfigFile = args['etcd-config-file'] ?? (process.env.ETCD_CONF || DRUID_ETCD_CONFIG_PATH);
    const withoutFile = await stat(etcdConfigFile).then(
      () => false,
      (err: NodeJS.ErrnoException) => err.code === 'ENOENT',
    );
    if (withoutFile && !serviceEndpoints && distinctMembers(member.initialCluster) > 1) {
      throw serviceEndpointsNeeded(etcdConfigFile);
    }
    const initialization = {
      etcdConfigFile,
      ...(dataDir !== undefined ? { dataDir } : {}),
      member,
      ...(serviceEndpoints ? { serviceEndpoints } : {}),
      // TLS and credentials of the sidecar's etcd connection; the endpoints are the cluster's, chosen per call
      connection: { ...base.connection, endpoints: [] },
      startEmptyWithoutBackup: args['start-empty-without-backup'],
    };
    return async (_assembly, context) => {
      const { bootstrapInitializer, Initialization, resumePromotion, servedConfig } = await import(
        './initialization.js'
      );
      const { LearnerPromotion } = await import('./learner-promotion.js');
      const promotion = new LearnerPromotion(base.connection, context.registry, context.logger);
      const options = {
        initialization,
        store: base.storeUrl,
        encryptionKeyFile: base.encryptionKeyFile,
        connection: base.connection,
      };
      return [
        new Initialization(
          bootstrapInitializer(options, promotion, context.logger),
          servedConfig(initialization),
          promotion,
          context,
          resumePromotion(initialization, promotion, base.connection),
        ),
      ];
    };
  },
};
