import {
  checkAndPlan,
  checkLocalDir,
  checkLocalStore,
  describePlan,
  etcdAccessOptions,
  etcdConnection,
  forkPreview,
  formatForkPreview,
  formatPlan,
  formatProofReport,
  formatSummary,
  getOptions,
  getSettings,
  logOptions,
  logSettings,
  memberOptions,
  openStore,
  ProofError,
  printKeys,
  printLog,
  programArgs,
  REPLAY_METHODS,
  refuseGap,
  reportUsage,
  restore,
  restoreSettings,
  runProgram,
  storeOption,
  VERIFY_METHODS,
} from '@etcd-steward/core';

await programArgs('etcd-restore')
  .usage(
    '$0 --store URL --data-dir DIR [member flags]\n$0 log --store URL [--prefix P | --key K]\n$0 get --store URL [--prefix P | --key K] [--to-revision N | --to-time T]\n\nRebuild an etcd data dir from a store: the newest full snapshot that verifies, then the deltas after it, up to the newest revision or a chosen one. The target is replaced only when the result verified. `log` and `get` look into the store first: the writes it holds, and the keys at a revision.',
  )
  .command(
    '$0',
    'Rebuild a data dir (the default command)',
    (y) =>
      etcdAccessOptions(memberOptions(storeOption(y)))
        .option('data-dir', {
          type: 'string',
          demandOption: true,
          describe: 'The data dir to create (or replace with --force)',
        })
        .option('force', { type: 'boolean', default: false, describe: 'Replace a non-empty --data-dir' })
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe:
            'Print the plan (objects, revisions, sizes) and change nothing; fails where the restore would fail before it starts, with its exit code',
        })
        .option('snapshot', {
          type: 'string',
          describe: 'Start from this full snapshot (object name) instead of the newest',
        })
        .option('to-revision', { type: 'number', describe: 'Restore exactly this revision (default: the newest)' })
        .option('to-time', {
          type: 'string',
          describe:
            'Restore the state at this moment (RFC 3339, to the nanosecond), by the times recorded with the delta events; not after the newest snapshot. Where the sidecar did not watch etcd live then, the store cannot tell the state: exit 1, naming the revisions it may have been (see --allow-partial)',
        })
        .option('fork', {
          type: 'boolean',
          default: false,
          describe:
            "The restored member goes on with this store (a restore to an earlier revision): once the restore is in place, set the store's snapshots past the restored revision aside under forks/ (never deleted), so that the store holds the history the cluster continues",
        })
        .option('allow-partial', {
          type: 'boolean',
          default: false,
          describe:
            'If a delta is damaged or missing, restore up to the last good revision and report what was lost; if --to-time falls where the sidecar did not watch etcd live, restore the newest revision known by then and report the ones it may have been',
        })
        .option('max-fetchers', {
          type: 'number',
          default: 4,
          describe: 'Deltas downloaded ahead of the one being applied',
        })
        .option('replay', {
          choices: REPLAY_METHODS,
          default: REPLAY_METHODS[0],
          describe:
            'How deltas are applied: direct = rows written into the db file; grpc = txns into a private etcd (slower, the reference)',
        })
        .option('verify', {
          choices: VERIFY_METHODS,
          default: VERIFY_METHODS[0],
          describe:
            'How the result proves itself before it replaces --data-dir: check = the full check of etcd-validate plus the revision, key count and keyspace fingerprint read from the db file (no etcd; memory independent of the db size); etcd = etcd started on a copy (maps the whole db)',
        })
        .option('max-txn-ops', { type: 'number', default: 10240, describe: 'Most operations in one txn (grpc replay)' })
        .option('max-request-bytes', {
          type: 'number',
          default: 10485760,
          describe: 'Largest txn in bytes (grpc replay)',
        })
        .option('lease-ttl', {
          type: 'number',
          default: 3600,
          describe:
            'TTL in seconds for leases the deltas use but the full snapshot lacks (the deltas do not record it)',
        })
        .option('etcd-bin-dir', { type: 'string', describe: 'Where etcd and etcdutl/etcdctl are (default: PATH)' })
        .option('verify-against', {
          type: 'string',
          describe:
            "The live cluster's client URLs (comma-separated): prove the result against every member's HashKV at the restored revision before it replaces --data-dir (docs/proof.md); not proven: exit 4 differs, 5 cannot be proven now, 6 another cluster's history, and the target stays as it was",
        })
        .example('$0 --store file:///var/backups/etcd --data-dir /var/lib/etcd', 'the newest state')
        .example(
          '$0 --store s3://backups/etcd --data-dir /var/lib/etcd --to-time 2026-11-21T22:00:00Z --dry-run',
          'what a point-in-time restore would use',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const settings = restoreSettings(args);
        await checkLocalStore(args.store);
        await checkLocalDir(settings.dataDir, '--data-dir');
        if (args['dry-run']) {
          const { plan } = await checkAndPlan(
            { ...settings, store: args.store, encryptionKeyFile: args['encryption-key-file'], signal },
            true,
          );
          // --fork: what the real run would set aside once the restore is in place
          const fork = args.fork
            ? await forkPreview(
                args.store,
                plan.target.revision ?? plan.chains[0].lastRevision,
                args['encryption-key-file'],
              )
            : undefined;
          process.stdout.write(
            output === 'json'
              ? `${JSON.stringify({ ...describePlan(plan), ...(fork ? { fork } : {}) })}\n`
              : `${formatPlan(plan)}${fork ? `\n${formatForkPreview(fork)}` : ''}`,
          );
          refuseGap(plan, plan.chains[0], settings.allowPartial);
          return;
        }
        const proveAgainst =
          args['verify-against'] === undefined
            ? undefined
            : await etcdConnection({ ...args, endpoints: args['verify-against'] });
        const result = await restore({
          ...settings,
          store: args.store,
          encryptionKeyFile: args['encryption-key-file'],
          fork: args.fork,
          proveAgainst,
          logger,
          signal,
        }).catch((err) => {
          if (err instanceof ProofError) {
            process.stdout.write(
              output === 'json'
                ? `${JSON.stringify({ proof: err.report })}\n`
                : `${formatProofReport(err.report).join('\n')}\n`,
            );
          }
          throw err;
        });
        process.stdout.write(output === 'json' ? `${JSON.stringify(result)}\n` : formatSummary(result));
      }),
  )
  .command(
    'log',
    'The writes the store holds, newest first, from the deltas of a chain and the state in its full snapshot: revision, recorded time, put or delete, key, value size and sha256, lease (docs/restore.md, Finding the bad write). Nothing is written but scratch files, removed at the end.',
    (y) =>
      logOptions(storeOption(y))
        .example(
          '$0 log --store s3://backups/etcd --prefix /registry/configmaps/prod/ --limit 20',
          'the last writes there',
        )
        .example(
          '$0 log --store file:///var/backups/etcd --key /registry/pods/prod/web-0 --output json',
          'one key, as JSON lines',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const settings = logSettings(args);
        await checkLocalStore(args.store);
        await checkLocalDir(settings.tmpDir, '--temp-dir', { mustExist: true });
        const store = await openStore(args.store, { encryptionKeyFile: args['encryption-key-file'] });
        try {
          // on a terminal the rows themselves show progress: a live line on the same screen would cut through them
          const progress = !(process.stdout.isTTY && process.stderr.isTTY);
          await printLog(store, { ...settings, logger, progress, signal }, output === 'json');
        } finally {
          await store.close?.();
        }
      }),
  )
  .command(
    'get',
    'The keys (with --values, their values) at a revision or moment, from the store alone, with the numbers etcdctl get --rev prints: the revision is restored into a scratch folder (as etcd-restore restores it), read, and removed.',
    (y) =>
      getOptions(storeOption(y)).example(
        '$0 get --store s3://backups/etcd --prefix /registry/configmaps/prod/ --to-revision 41022 --values',
        'what a restore to revision 41022 brings back there',
      ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const settings = getSettings(args);
        await checkLocalStore(args.store);
        await checkLocalDir(settings.tmpDir, '--temp-dir', { mustExist: true });
        await printKeys(
          { ...settings, store: args.store, encryptionKeyFile: args['encryption-key-file'], logger, signal },
          output === 'json',
          settings.values,
        );
      }),
  )
  .parseAsync()
  .catch(reportUsage);
