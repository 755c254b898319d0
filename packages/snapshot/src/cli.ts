import { catalogStore, takeFullSnapshot } from '@etcd-steward/core/backup';
import {
  checkLocalDir,
  checkLocalStore,
  etcdConnection,
  etcdOptions,
  programArgs,
  reportUsage,
  runProgram,
  storeOption,
  tempDirOption,
} from '@etcd-steward/core/cli';
import { COMPRESSION_POLICIES, type CompressionPolicy } from '@etcd-steward/core/format';
import { openStore } from '@etcd-steward/core/store';
import { type SidecarArgs, type SidecarConfig, sidecarConfig, sidecarOptions } from './run/sidecar-config.js';
import { saveSummary } from './save/save-summary.js';
import { formatSnapshotTable, snapshotListing } from './save/snapshot-table.js';

await programArgs('etcd-snapshot')
  .usage('$0 <command>\n\nSnapshots of etcd, kept in an object store in the format etcd-backup-restore uses.')
  .command(
    'save',
    'Take one full snapshot of a running etcd now and store it',
    (y) =>
      storeOption(etcdOptions(y))
        .option('compression', {
          choices: COMPRESSION_POLICIES,
          default: 'zstd' as CompressionPolicy,
          describe: 'zstd is fastest; gzip, zlib and none are readable by etcd-backup-restore too',
        })
        .option('temp-dir', tempDirOption)
        .example('$0 save --endpoints http://127.0.0.1:2379 --store file:///var/backups/etcd', ''),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const conn = await etcdConnection(args);
        await checkLocalStore(args.store);
        await checkLocalDir(args['temp-dir'], '--temp-dir', { mustExist: true });
        // A writer: the first snapshot creates a store's folder (docs/stores.md).
        const store = await openStore(args.store, {
          encryptionKeyFile: args['encryption-key-file'],
          allowMissingFolder: true,
        });
        const saved = await takeFullSnapshot({
          connection: conn,
          store,
          compression: args.compression,
          tempDir: args['temp-dir'],
          logger,
          signal,
        });
        process.stdout.write(saveSummary(saved, store.location, output));
      }),
  )
  .command(
    'list',
    "List the store's snapshots by the time they were taken, oldest first",
    (y) => storeOption(y),
    (args) =>
      runProgram(args.output, async ({ output, logger }) => {
        await checkLocalStore(args.store);
        // with the versions a bucket keeps, as a restore reads it: a hidden snapshot is listed, and says so
        const catalog = await catalogStore(await openStore(args.store), { versions: true });
        if (catalog.versionsUnreadable) logger.warn(catalog.versionsUnreadable);
        const listing = snapshotListing(catalog.snapshots);
        process.stdout.write(output === 'json' ? `${JSON.stringify(listing)}\n` : formatSnapshotTable(listing));
      }),
  )
  .command(
    'run',
    'Run as the sidecar next to an etcd member: scheduled full snapshots, delta snapshots, HTTP API, metrics',
    (y) =>
      sidecarOptions(y).example(
        '$0 run --endpoints http://127.0.0.1:2379 --store s3://backups/etcd-main --spool-dir /var/lib/etcd-snapshot/spool',
        '',
      ),
    async (args) => {
      let config: SidecarConfig;
      try {
        config = await sidecarConfig(args as unknown as SidecarArgs);
      } catch (err) {
        reportUsage(err);
      }
      return runProgram(args.output, async ({ logger, signal }) => {
        // Loaded only here: the sidecar's modules (metrics, spool, HTTP) would add ~50 ms to every `save`.
        const { runSidecar } = await import('./run/sidecar.js');
        return runSidecar(config, { logger, signal });
      });
    },
  )
  .demandCommand(1, 'name a command: save, list or run')
  .parseAsync()
  .catch(reportUsage);
