import { openStore, programArgs, reportUsage, runProgram, storeOption } from '@etcd-steward/core';
import { restore } from './restore.js';

await programArgs('etcd-restore')
  .usage(
    '$0 --store URL --data-dir DIR [member flags]\n\nRebuild an etcd data dir from the newest full snapshot in a store. The target is replaced only when the result verified.',
  )
  .command(
    '$0',
    false,
    (y) =>
      storeOption(y)
        .option('data-dir', { type: 'string', demandOption: true, describe: 'The data dir to create (or replace with --force)' })
        .option('force', { type: 'boolean', default: false, describe: 'Replace a non-empty --data-dir' })
        .option('snapshot', { type: 'string', describe: 'Restore this full snapshot (object name) instead of the newest' })
        .option('name', { type: 'string', default: 'default', describe: 'Member name, as etcd --name' })
        .option('initial-cluster', {
          type: 'string',
          describe: 'name=peerURL,... as etcd --initial-cluster (default: <name>=<initial-advertise-peer-urls>)',
        })
        .option('initial-cluster-token', { type: 'string', default: 'etcd-cluster', describe: 'As etcd --initial-cluster-token' })
        .option('initial-advertise-peer-urls', {
          type: 'string',
          default: 'http://localhost:2380',
          describe: "This member's peer URLs, as etcd --initial-advertise-peer-urls",
        })
        .option('etcd-bin-dir', { type: 'string', describe: 'Where etcd and etcdutl/etcdctl are (default: PATH)' })
        .example('$0 --store file:///var/backups/etcd --data-dir /var/lib/etcd', ''),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const store = await openStore(args.store);
        const result = await restore({
          store,
          dataDir: args['data-dir'],
          force: args.force,
          snapshot: args.snapshot,
          etcdBinDir: args['etcd-bin-dir'],
          member: {
            name: args.name,
            initialCluster: args['initial-cluster'] ?? `${args.name}=${args['initial-advertise-peer-urls']}`,
            initialClusterToken: args['initial-cluster-token'],
            initialAdvertisePeerUrls: args['initial-advertise-peer-urls'],
          },
          logger,
          signal,
        });
        process.stdout.write(
          output === 'json'
            ? `${JSON.stringify(result)}\n`
            : `restored ${result.dataDir} from ${result.snapshot} (revision ${result.revision})\n`,
        );
      }),
  )
  .parseAsync()
  .catch(reportUsage);
