import {
  ebrRetentionOptions,
  formatPruneTable,
  keepRuleOptions,
  openStore,
  parseDuration,
  programArgs,
  pruneComplete,
  pruneJson,
  pruneStore,
  reportUsage,
  retentionPolicy,
  runProgram,
  storeOption,
  UsageError,
} from '@etcd-steward/core';

await programArgs('etcd-gc')
  .usage(
    '$0 --store URL (--garbage-collection-policy Exponential|LimitBased | --keep-...) [--dry-run]\n\nDelete the snapshots the retention policy no longer keeps. The newest restorable chain (the newest full snapshot that verifies and every delta after it) is always kept; objects that are not snapshots are never touched. Exit code: 0 every delete went through, 1 some failed (or the store is locked by another gc or compaction), 2 bad usage. See docs/gc.md.',
  )
  .command(
    '$0',
    false,
    (y) =>
      keepRuleOptions(ebrRetentionOptions(storeOption(y)))
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'Print every snapshot with keep or delete and the rule that decided it; delete nothing',
        })
        .option('delete-concurrency', { type: 'number', default: 16, describe: 'Deletes in flight at once' })
        .option('delete-attempts', {
          type: 'number',
          default: 3,
          describe: 'Tries per object before its delete is reported as failed',
        })
        .option('incomplete-upload-max-age', {
          type: 'string',
          default: '24h',
          describe:
            "Abort multipart uploads (S3) begun longer ago than this, and delete ebr's chunk objects of uploads that never completed",
        })
        .option('lock-ttl', {
          type: 'string',
          default: '2m',
          describe: 'The store lock expires this long after a holder that died last renewed it',
        })
        .option('lock-settle', {
          type: 'string',
          default: '5s',
          describe: 'How long a taker of the store lock waits before it reads its lock back (docs/gc.md §5)',
        })
        .example('$0 --store s3://backups/etcd --keep-hourly 24 --keep-daily 7 --dry-run', 'preview restic-style rules')
        .example('$0 --store gs://backups/etcd --garbage-collection-policy LimitBased --max-backups 7', 'as ebr does'),
    (args) =>
      runProgram(args.output, async ({ logger, output, signal }) => {
        const chunkMaxAgeMs = parseDuration(args['incomplete-upload-max-age'], 'incomplete-upload-max-age');
        const policy = retentionPolicy(args, { chunkMaxAgeMs });
        const whole = (flag: 'delete-concurrency' | 'delete-attempts') => {
          const value = args[flag];
          if (!Number.isSafeInteger(value) || value < 1 || value > 1000) {
            throw new UsageError(`--${flag} ${value} must be a whole number from 1 to 1000`);
          }
          return value;
        };
        const concurrency = whole('delete-concurrency');
        const attempts = whole('delete-attempts');
        const lockTtlMs = parseDuration(args['lock-ttl'], 'lock-ttl');
        if (lockTtlMs < 30_000) throw new UsageError('--lock-ttl must be at least 30s');
        const store = await openStore(args.store, { encryptionKeyFile: args['encryption-key-file'] });
        try {
          const report = await pruneStore(store, {
            policy,
            dryRun: args['dry-run'],
            concurrency,
            attempts,
            lockTtlMs,
            lockSettleMs: parseDuration(args['lock-settle'], 'lock-settle'),
            incompleteUploadMaxAgeMs: chunkMaxAgeMs,
            logger,
            signal,
            purpose: 'etcd-gc',
          });
          process.stdout.write(output === 'json' ? pruneJson(report, store.location) : formatPruneTable(report));
          return pruneComplete(report) ? 0 : 1;
        } finally {
          await store.close?.();
        }
      }),
  )
  .parseAsync()
  .catch(reportUsage);
