import {
  BOOTSTRAP_CASES,
  bootstrap,
  checkLocalDir,
  checkLocalStore,
  type DataDirReport,
  etcdConnection,
  etcdOptions,
  formatBootstrap,
  formatVerdict,
  memberOptions,
  memberSettings,
  programArgs,
  promoteLearner,
  reportUsage,
  runProgram,
  storeOption,
  UsageError,
  VERDICTS,
  validateDataDir,
} from '@etcd-steward/core';
import type { Argv } from 'yargs';

const exitCodes = Object.entries(VERDICTS)
  .map(([, v]) => `${v.exitCode} ${v.wording}`)
  .join(', ');
const refusals = [...new Set(Object.values(BOOTSTRAP_CASES).map((c) => c.exitCode))].filter((c) => c !== 0).join(', ');

/** --endpoints for the other members: no default, since this member's own etcd is not running. */
const otherMembers = {
  type: 'string',
  default: undefined,
  describe: "The other members' client URLs, comma-separated (needed when --initial-cluster names several members)",
} as const;

/** The data dir and how it is checked: check's flags, which bootstrap checks with too. */
function checkOptions<T>(y: Argv<T>) {
  return y
    .option('data-dir', {
      type: 'string',
      demandOption: true,
      describe: "etcd's data dir (the one holding member/)",
    })
    .option('mode', {
      choices: ['sanity', 'full'] as const,
      default: 'sanity' as const,
      describe:
        'sanity: layout, meta pages, newest revision, consistent index, every WAL segment (etcd reads them all at start-up), the raft snapshot etcd starts from; full: also every page of the db',
    })
    .option('fail-below-revision', {
      type: 'number',
      describe:
        "Data below this revision is invalid (restore needed), as ebr's failbelowrevision: the revision etcd would serve, the db's plus what it replays from the WAL",
    });
}

function revisionFlag(name: string, value: number | undefined): number | undefined {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new UsageError(`--${name} ${value}: give a whole number of revisions, 0 or more`);
  }
  return value;
}

await programArgs('etcd-validate')
  .usage(
    '$0 check --data-dir DIR [--mode sanity|full] [--store URL]\n$0 bootstrap --data-dir DIR --store URL [member flags] [--endpoints URLs]\n$0 promote --name NAME --initial-advertise-peer-urls URLs --endpoints URLs',
  )
  .command(
    'check',
    `Is this etcd data dir safe to start etcd on? Prints one verdict line (or JSON) and exits with its code: ${exitCodes}; 1 the check itself failed, 2 bad usage.`,
    (y) =>
      checkOptions(storeOption(y, { required: false }))
        .option('max-revisions-ahead', {
          type: 'number',
          default: 1_000_000,
          describe:
            "With --store: warn when the revision etcd would serve is more than this ahead of the store's newest snapshot",
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
  .command(
    'bootstrap',
    `Before etcd starts: check the data dir, then start it as it is, restore it from the store (the old data moved aside), or rejoin the cluster as a learner; docs/validate.md has the decision table. Exits 0 when etcd may start, else ${refusals} as check does; 1 failed, 2 bad usage.`,
    (y) =>
      checkOptions(memberOptions(etcdOptions(storeOption(y))))
        .option('endpoints', otherMembers)
        .option('dry-run', {
          type: 'boolean',
          default: false,
          describe: 'Print the decision and what would be done; change nothing',
        })
        .option('etcd-bin-dir', { type: 'string', describe: 'Where etcd and etcdutl/etcdctl are (default: PATH)' })
        .example('$0 bootstrap --data-dir /var/etcd/data --store s3://backups/etcd', 'a single member')
        .example(
          '$0 bootstrap --data-dir /var/etcd/data --store s3://backups/etcd --name etcd-1 --initial-cluster etcd-0=https://etcd-0:2380,etcd-1=https://etcd-1:2380,etcd-2=https://etcd-2:2380 --initial-advertise-peer-urls https://etcd-1:2380 --endpoints https://etcd-0:2379,https://etcd-2:2379',
          'a member of three',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const member = memberSettings(args);
        await checkLocalStore(args.store);
        await checkLocalDir(args['data-dir'], '--data-dir');
        const result = await bootstrap({
          dataDir: args['data-dir'],
          store: args.store,
          mode: args.mode,
          failBelowRevision: revisionFlag('fail-below-revision', args['fail-below-revision']),
          namespace: process.env.POD_NAMESPACE,
          member,
          cluster:
            args.endpoints === undefined ? undefined : await etcdConnection({ ...args, endpoints: args.endpoints }),
          dryRun: args['dry-run'],
          etcdBinDir: args['etcd-bin-dir'],
          encryptionKeyFile: args['encryption-key-file'],
          logger,
          signal,
        });
        process.stdout.write(output === 'json' ? `${JSON.stringify(result)}\n` : formatBootstrap(result));
        return result.exitCode;
      }),
  )
  .command(
    'promote',
    'After a rejoin: wait until this member (a learner) has caught up with the leader, then make it a voting member. Exits 0 once it votes.',
    (y) =>
      memberOptions(etcdOptions(y))
        // the member is found by name or peer URL; the cluster's layout is the cluster's own
        .hide('initial-cluster')
        .hide('initial-cluster-token')
        .option('endpoints', { ...otherMembers, demandOption: true, describe: "Client URLs of the cluster's members" })
        .option('timeout', {
          type: 'number',
          default: 300,
          describe: 'Seconds to wait for the learner to catch up',
        })
        .example(
          '$0 promote --name etcd-1 --initial-advertise-peer-urls https://etcd-1:2380 --endpoints https://etcd-0:2379',
          '',
        ),
    (args) =>
      runProgram(args.output, async ({ logger, signal, output }) => {
        const member = memberSettings(args);
        if (!(args.timeout > 0)) throw new UsageError(`--timeout ${args.timeout}: give a number of seconds above 0`);
        const result = await promoteLearner({
          connection: await etcdConnection({ ...args, endpoints: args.endpoints }),
          member,
          timeoutMs: args.timeout * 1000,
          logger,
          signal,
        });
        process.stdout.write(
          output === 'json'
            ? `${JSON.stringify(result)}\n`
            : `${member.name} (id ${result.id}) ${result.promoted ? 'is now a voting member' : 'was already a voting member'}\n`,
        );
      }),
  )
  .demandCommand(1, 'give a command: check, bootstrap or promote')
  .parseAsync()
  .catch(reportUsage);
