import {
  type DataDirReport,
  formatVerdict,
  programArgs,
  reportUsage,
  runProgram,
  storeOption,
  UsageError,
  VERDICTS,
  validateDataDir,
} from '@etcd-steward/core';

const exitCodes = Object.entries(VERDICTS)
  .map(([, v]) => `${v.exitCode} ${v.wording}`)
  .join(', ');

function revisionFlag(name: string, value: number | undefined): number | undefined {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new UsageError(`--${name} ${value}: give a whole number of revisions, 0 or more`);
  }
  return value;
}

await programArgs('etcd-validate')
  .usage('$0 check --data-dir DIR [--mode sanity|full] [--store URL]')
  .command(
    'check',
    `Is this etcd data dir safe to start etcd on? Prints one verdict line (or JSON) and exits with its code: ${exitCodes}; 1 the check itself failed, 2 bad usage.`,
    (y) =>
      storeOption(y, { required: false })
        .option('data-dir', {
          type: 'string',
          demandOption: true,
          describe: "etcd's data dir (the one holding member/)",
        })
        .option('mode', {
          choices: ['sanity', 'full'] as const,
          default: 'sanity' as const,
          describe:
            'sanity: layout, meta pages, newest revision, consistent index, the newest WAL segment (fast on any size); full: also every page of the db and every WAL segment',
        })
        .option('fail-below-revision', {
          type: 'number',
          describe: "A db below this revision is invalid (restore needed), as ebr's failbelowrevision",
        })
        .option('max-revisions-ahead', {
          type: 'number',
          default: 1_000_000,
          describe: "With --store: warn when the db is more revisions than this ahead of the store's newest snapshot",
        })
        .example('$0 check --data-dir /var/etcd/data', 'the quick check an init container runs')
        .example(
          '$0 check --data-dir /var/etcd/data --mode full --store s3://backups/etcd',
          'every page, and not behind the backups',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, output }) => {
        const report: DataDirReport = await validateDataDir({
          dataDir: args['data-dir'],
          mode: args.mode,
          namespace: process.env.POD_NAMESPACE,
          store: args.store,
          failBelowRevision: revisionFlag('fail-below-revision', args['fail-below-revision']),
          maxRevisionsAhead: revisionFlag('max-revisions-ahead', args['max-revisions-ahead']) ?? 0,
        });
        if (output === 'json') {
          process.stdout.write(`${JSON.stringify(report)}\n`);
        } else {
          for (const f of report.findings) if (f.severity === 'warning') logger.warn(f.message, { check: f.check });
          process.stdout.write(formatVerdict(report));
        }
        return report.exitCode;
      }),
  )
  .demandCommand(1, 'give a command: check')
  .parseAsync()
  .catch(reportUsage);
