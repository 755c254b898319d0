import { tmpdir } from 'node:os';
import {
  COMPRESSION_POLICIES,
  type CompressionPolicy,
  checkCompaction,
  checkLocalDir,
  checkLocalStore,
  compactChain,
  describeCompactionPlan,
  flagGiven,
  formatCompactionPlan,
  formatCompactionSummary,
  NothingToFoldError,
  parseDuration,
  programArgs,
  reportUsage,
  runProgram,
  storeOption,
  UsageError,
} from '@etcd-steward/core';

/** A timeout flag: a Go-style duration above zero, in milliseconds. */
function timeout(args: Record<string, unknown>, flag: string): number {
  const ms = parseDuration(args[flag] as string, flag);
  if (ms <= 0) throw new UsageError(`${flagGiven(args, flag, args[flag])} must be above zero, e.g. 30m`);
  return ms;
}

await programArgs('etcd-compact')
  .usage(
    '$0 --store URL [--temp-dir DIR]\n\nFold the newest full snapshot and the deltas after it into one new full snapshot at their last revision (compacted, defragmented, verified), so that the next restore starts there. Adds one object to the store and deletes nothing. Run it as a CronJob, never inside the sidecar.',
  )
  .command(
    '$0',
    false,
    (y) =>
      storeOption(y)
        // --temp-dir as in etcd-snapshot; --work-dir, its first name here, still works.
        .option('temp-dir', {
          type: 'string',
          alias: 'work-dir',
          default: tmpdir(),
          describe:
            'Scratch space for the restored chain, the compacted db and the new snapshot (about three times the db size); a folder inside it is cleared on every run',
        })
        .option('defragment', {
          type: 'boolean',
          default: true,
          describe:
            "ebr's flag, accepted: the compacted db is written fresh, so the snapshot holds no free pages either way",
        })
        .option('etcd-snapshot-timeout', {
          type: 'string',
          default: '30m',
          describe: "Longest writing the compacted db may take (Go duration; ebr's flag and default)",
        })
        .option('etcd-defrag-timeout', {
          type: 'string',
          default: '8m',
          describe: "ebr's flag, accepted and checked: no separate defragmentation runs (Go duration)",
        })
        .option('compression', {
          choices: COMPRESSION_POLICIES,
          default: 'zstd' as CompressionPolicy,
          describe: 'Of the new snapshot: zstd is fastest; gzip, zlib and none are readable by etcd-backup-restore too',
        })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'Print what would be folded (objects, revisions, bytes) and change nothing',
        })
        .option('max-fetchers', {
          type: 'number',
          default: 4,
          describe: 'Deltas downloaded ahead of the one being applied',
        })
        .option('lock-ttl', {
          type: 'string',
          default: '2m',
          describe:
            'The store lock (held from the plan to the put) expires this long after a holder that died last renewed it',
        })
        .option('lock-settle', {
          type: 'string',
          default: '5s',
          describe: 'How long a taker of the store lock waits before it reads its lock back (docs/gc.md §5)',
        })
        .option('etcd-bin-dir', { type: 'string', describe: 'Where etcd and etcdutl/etcdctl are (default: PATH)' })
        .example('$0 --store s3://backups/etcd', 'fold the newest chain into a new full snapshot')
        .example('$0 --store file:///var/backups/etcd --dry-run', 'what it would fold'),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const maxFetchers = args['max-fetchers'];
        if (!Number.isSafeInteger(maxFetchers) || maxFetchers < 1 || maxFetchers > 64) {
          throw new UsageError(`${flagGiven(args, 'max-fetchers', maxFetchers)} must be a whole number from 1 to 64`);
        }
        const settings = {
          store: args.store,
          workDir: args['temp-dir'],
          defragment: args.defragment,
          snapshotTimeoutMs: timeout(args, 'etcd-snapshot-timeout'),
          defragTimeoutMs: timeout(args, 'etcd-defrag-timeout'),
          compression: args.compression,
          etcdBinDir: args['etcd-bin-dir'],
          maxFetchers,
          lockTtlMs: parseDuration(args['lock-ttl'], 'lock-ttl'),
          lockSettleMs: parseDuration(args['lock-settle'], 'lock-settle'),
          encryptionKeyFile: args['encryption-key-file'],
        };
        if (settings.lockTtlMs < 30_000) throw new UsageError('--lock-ttl must be at least 30s');
        await checkLocalStore(args.store);
        await checkLocalDir(settings.workDir, '--temp-dir', { mustExist: true });
        const { binaries, plan } = await checkCompaction({ ...settings, signal });
        const printPlan = (p: typeof plan) =>
          process.stdout.write(
            output === 'json' ? `${JSON.stringify(describeCompactionPlan(p))}\n` : formatCompactionPlan(p),
          );
        // the plan before the lock is a preview; the run plans again once it holds the lock
        if (args['dry-run'] || plan.nothingToFold) return void printPlan(plan);
        try {
          const result = await compactChain({ ...settings, logger, signal }, binaries);
          process.stdout.write(output === 'json' ? `${JSON.stringify(result)}\n` : formatCompactionSummary(result));
        } catch (err) {
          if (!(err instanceof NothingToFoldError)) throw err;
          printPlan(err.plan);
        }
      }),
  )
  .parseAsync()
  .catch(reportUsage);
