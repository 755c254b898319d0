import { createReadStream } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import {
  type BackupFilters,
  COPY_CHECKS,
  checkCopySettings,
  checkFilters,
  checkLocalDir,
  checkLocalStore,
  copyBackups,
  etcdAccessOptions,
  etcdConnection,
  exportBackups,
  formatCopySummary,
  formatExportSummary,
  formatImportSummary,
  formatStoreProof,
  formatVerifyReport,
  importBackups,
  keyFilesReadable,
  PROOF_EXIT_CODES,
  parseDuration,
  programArgs,
  proveStore,
  reportUsage,
  runProgram,
  storeOption,
  storePairOptions,
  UsageError,
  VERIFY_EXIT_CODES,
  verifyStore,
} from '@etcd-steward/core';
import type { Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';

const parallelOption = {
  type: 'number',
  default: 10,
  alias: 'max-parallel-copy-operations',
  describe: 'Objects copied (or read) at once; ebr calls it --max-parallel-copy-operations',
} as const;

function filterOptions<T>(y: Argv<T>) {
  return y
    .option('max-backups-to-copy', {
      type: 'number',
      describe: 'Only the newest N backups (a full snapshot and the deltas after it), as ebr counts them; -1: all',
    })
    .option('max-backup-age', {
      type: 'number',
      describe: 'Only backups whose full snapshot is at most this many days old, as ebr; -1: any age',
    })
    .option('since-revision', { type: 'number', describe: 'Only snapshots that reach this revision or beyond' })
    .option('newest-chain-only', {
      type: 'boolean',
      default: false,
      describe: 'Only the newest restorable chain: the newest full snapshot and the deltas after it',
    });
}

/** ebr's -1 means no limit. */
const unlimited = (n: number | undefined) => (n === -1 ? undefined : n);

function filters(args: {
  'max-backups-to-copy'?: number;
  'max-backup-age'?: number;
  'since-revision'?: number;
  'newest-chain-only'?: boolean;
}): BackupFilters {
  const f: BackupFilters = {
    maxBackups: unlimited(args['max-backups-to-copy']),
    maxBackupAgeDays: unlimited(args['max-backup-age']),
    sinceRevision: args['since-revision'],
    newestChainOnly: args['newest-chain-only'],
  };
  checkFilters(f);
  return f;
}

/** yargs takes a lone `-` for a positional argument; `--to -` and `--from -` mean stdout and stdin here. */
const argv = hideBin(process.argv).flatMap((token, i, all) =>
  token === '-' && (all[i - 1] === '--to' || all[i - 1] === '--from')
    ? []
    : /^--(to|from)$/.test(token) && all[i + 1] === '-'
      ? [`${token}=-`]
      : [token],
);

await programArgs('etcd-copy-backups', argv)
  .usage(
    '$0 [copy] --from URL --to URL | export --from URL --to FILE.tar|- | import --from FILE.tar|- --to URL | verify --store URL\n\nCopy etcd backups between stores (any provider to any), incrementally and resumably, every object checked on the way; carry them as one tar file; check a store.',
  )
  .command(
    ['copy', '$0'],
    'Copy snapshots from one store to another, full snapshots first, each kind newest first, skipping what the destination already holds; rerun to resume. Exits 1 if a source object was damaged (it is named and not copied).',
    (y) =>
      filterOptions(storePairOptions(y))
        .option('max-parallel', parallelOption)
        .option('check', {
          choices: COPY_CHECKS,
          default: 'stored' as const,
          describe:
            'stored: an object that carries the sha256 recorded when it was stored is checked by it, one without is decompressed and its content checked; content: every object decompressed and checked',
        })
        .option('wait-for-final-snapshot', {
          type: 'boolean',
          default: false,
          describe: "First wait for a final full snapshot in the source (its etcd was stopped), as ebr's copy",
        })
        .option('wait-for-final-snapshot-timeout', {
          type: 'string',
          default: '0',
          describe: 'How long to wait for it (e.g. 10m), then copy what there is; 0: no limit',
        })
        .example('$0 --from s3://backups/etcd --to gs://standby/etcd', 'copy every snapshot not yet there')
        .example(
          '$0 --from file:///var/backups/etcd --to azblob://dr/etcd --newest-chain-only',
          'only what restores the newest state',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const settings = {
          from: args.from as string,
          to: args.to as string,
          maxParallel: args['max-parallel'],
          check: args.check,
          encryptionKeyFile: args['encryption-key-file'],
          sourceEncryptionKeyFile: args['source-encryption-key-file'],
          ...filters(args),
        };
        const timeoutMs = parseDuration(args['wait-for-final-snapshot-timeout'], 'wait-for-final-snapshot-timeout');
        checkCopySettings(settings);
        await checkLocalStore(settings.from, '--from');
        await checkLocalStore(settings.to, '--to');
        const summary = await copyBackups({
          ...settings,
          ...(args['wait-for-final-snapshot'] ? { waitForFinalSnapshot: { timeoutMs } } : {}),
          logger,
          signal,
        });
        process.stdout.write(output === 'json' ? `${JSON.stringify(summary)}\n` : formatCopySummary(summary));
        return summary.damaged.length > 0 ? 1 : 0;
      }),
  )
  .command(
    'export',
    'Write a restorable chain (the newest, or what the filters select) into one tar file with a manifest, encrypted snapshots as stored; - writes to stdout.',
    (y) =>
      filterOptions(
        y
          .option('from', { type: 'string', demandOption: true, describe: 'The store to export from' })
          .option('to', { type: 'string', demandOption: true, describe: 'The tar file to write, or - for stdout' })
          .option('encryption-key-file', {
            type: 'string',
            describe:
              'File of keys (docs/encryption.md) that decrypt encrypted snapshots to check their content; the tar holds them encrypted either way, and without it they are checked as stored bytes',
          })
          .check(keyFilesReadable),
      ).example(
        '$0 export --from s3://backups/etcd --to - | ssh host etcd-copy-backups import --from - --to file:///srv/etcd',
        'carry the newest chain to another machine',
      ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const f = filters(args);
        await checkLocalStore(args.from, '--from');
        if (args.to === '-') {
          if (process.stdout.isTTY) throw new UsageError('--to -: stdout is a terminal; redirect it or give a file');
        } else {
          await checkLocalDir(dirname(args.to), '--to', { mustExist: true });
          if ((await stat(args.to).catch(() => undefined))?.isDirectory()) {
            throw new UsageError(`--to ${args.to} is a directory: give the path of the tar file to write`);
          }
        }
        const summary = await exportBackups({
          ...f,
          from: args.from,
          to: args.to,
          encryptionKeyFile: args['encryption-key-file'],
          logger,
          signal,
        });
        // With the tar on stdout, the summary goes where the logs go.
        if (args.to === '-') logger.info(formatExportSummary(summary).trim(), {});
        else process.stdout.write(output === 'json' ? `${JSON.stringify(summary)}\n` : formatExportSummary(summary));
      }),
  )
  .command(
    'import',
    'Store the snapshots of a tar file that export wrote, each checked before it is stored; - reads stdin. Exits 1 if one was damaged.',
    (y) =>
      y
        .option('from', { type: 'string', demandOption: true, describe: 'The tar file to read, or - for stdin' })
        .option('to', { type: 'string', demandOption: true, describe: 'The store to import into' })
        .option('encryption-key-file', {
          type: 'string',
          describe:
            'File of keys (docs/encryption.md) that decrypt encrypted snapshots to check their content; they are stored as they are, encrypted, and without it checked as stored bytes',
        })
        .check(keyFilesReadable),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        await checkLocalStore(args.to, '--to');
        if (args.from !== '-' && !(await stat(args.from).catch(() => undefined))?.isFile()) {
          throw new UsageError(`--from ${args.from} is not a file: give the tar file export wrote, or - for stdin`);
        }
        const summary = await importBackups({
          input: args.from === '-' ? process.stdin : createReadStream(args.from),
          label: args.from === '-' ? 'stdin' : args.from,
          to: args.to,
          encryptionKeyFile: args['encryption-key-file'],
          logger,
          signal,
        });
        process.stdout.write(output === 'json' ? `${JSON.stringify(summary)}\n` : formatImportSummary(summary));
        return summary.damaged.length > 0 ? 1 : 0;
      }),
  )
  .command(
    'verify',
    `Read and check every snapshot of a store and the continuity of its chains; report what restores up to which revision and what is damaged. With --against: restore the newest chain into scratch instead and prove it against the live cluster (etcd's HashKV, docs/proof.md). Exit code: ${VERIFY_EXIT_CODES.restorable} the newest revision restores (with --against: proven), ${VERIFY_EXIT_CODES.notRestorable} it does not, ${VERIFY_EXIT_CODES.tampered} it does, but snapshots were hidden or replaced since they were stored (read from their older versions), ${PROOF_EXIT_CODES.mismatch} it differs from the cluster, ${PROOF_EXIT_CODES.unprovable} it cannot be proven now, ${PROOF_EXIT_CODES.foreign} the store holds another cluster's history, 1 the check itself failed, 2 bad usage.`,
    (y) =>
      etcdAccessOptions(
        storeOption(y)
          .option('max-parallel', { ...parallelOption, describe: 'Objects read at once' })
          .option('against', {
            type: 'string',
            describe:
              "The live cluster's client URLs (comma-separated): restore the newest chain into scratch and prove it against every member's HashKV",
          })
          .option('record', {
            type: 'boolean',
            default: false,
            describe:
              "With --against: write the outcome to the store's proofs/latest.json (beside v2/, outside what ebr lists), which the sidecar publishes as metrics",
          })
          .option('temp-dir', {
            type: 'string',
            describe:
              'With --against: where the scratch restore goes, about twice the db; created when missing (default: the system temp dir)',
          })
          .option('etcd-bin-dir', {
            type: 'string',
            describe: 'With --against: where etcd and etcdutl/etcdctl are, for the restore (default: PATH)',
          }),
      ).example(
        '$0 verify --store s3://backups/etcd --against https://etcd-0:2379,https://etcd-1:2379 --cacert ca.pem --record',
        'the restore drill',
      ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        await checkLocalStore(args.store);
        if (args.against === undefined) {
          for (const flag of ['record', 'temp-dir', 'etcd-bin-dir', 'cacert', 'cert', 'key', 'user'] as const) {
            if (args[flag] !== undefined && args[flag] !== false) {
              throw new UsageError(`--${flag} goes with --against ENDPOINTS: add it, or leave --${flag} out`);
            }
          }
          const report = await verifyStore({
            store: args.store,
            maxParallel: args['max-parallel'],
            encryptionKeyFile: args['encryption-key-file'],
            logger,
            signal,
          });
          process.stdout.write(output === 'json' ? `${JSON.stringify(report)}\n` : formatVerifyReport(report));
          return report.exitCode;
        }
        const against = await etcdConnection({ ...args, endpoints: args.against });
        const tempDir = args['temp-dir'] ?? tmpdir();
        // created when missing, as the sidecar and the restore create theirs (a path that can never be one: exit 2)
        await checkLocalDir(tempDir, '--temp-dir');
        await mkdir(tempDir, { recursive: true });
        const result = await proveStore({
          store: args.store,
          encryptionKeyFile: args['encryption-key-file'],
          against,
          tempDir,
          etcdBinDir: args['etcd-bin-dir'],
          record: args.record,
          logger,
          signal,
        });
        // proven, but through snapshots hidden or replaced since they were stored: verify's alarm, as without --against
        if (result.exitCode === PROOF_EXIT_CODES.proven && result.recovered)
          result.exitCode = VERIFY_EXIT_CODES.tampered;
        process.stdout.write(output === 'json' ? `${JSON.stringify(result)}\n` : formatStoreProof(result));
        return result.exitCode;
      }),
  )
  .parseAsync()
  .catch(reportUsage);
