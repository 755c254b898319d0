import { access, constants, readFile, stat } from 'node:fs/promises';
import type { Argv } from 'yargs';
import { UsageError } from '../common/errors.js';
import { type EtcdConnection, parseEndpoints, type TlsMaterial } from '../etcd/etcd-client.js';

/** The flags every program that talks to etcd takes, the same everywhere. */
export function etcdOptions<T>(y: Argv<T>) {
  return etcdAccessOptions(
    y.option('endpoints', {
      type: 'string',
      default: 'http://127.0.0.1:2379',
      describe: 'etcd client URLs (or host:port, meaning http://), comma-separated',
    }),
  ).option('password', {
    type: 'string',
    describe:
      'Password of --user; the program moves it out of its command line as it starts, but it shows in the process list until then: prefer --password-file or ETCD_STEWARD_PASSWORD',
  });
}

/**
 * How to reach etcd besides its endpoints (TLS, auth): for a program whose etcd is an extra, named by a flag of its
 * own (`--against`, `--verify-against`). No `--password`: these programs do not move it off their command line.
 */
export function etcdAccessOptions<T>(y: Argv<T>) {
  return y
    .option('cacert', { type: 'string', describe: 'CA bundle to verify etcd servers (TLS)' })
    .option('cert', { type: 'string', describe: 'Client certificate for etcd (TLS, with --key)' })
    .option('key', { type: 'string', describe: 'Client key for etcd (TLS, with --cert)' })
    .option('user', {
      type: 'string',
      describe: 'etcd user (etcd auth), with the password from --password-file or ETCD_STEWARD_PASSWORD',
    })
    .option('password-file', {
      type: 'string',
      describe: 'File holding the password of --user (e.g. a mounted Secret)',
    });
}

/** The etcd flags as yargs parsed them. */
export interface EtcdArgs {
  endpoints: string;
  cacert?: string;
  cert?: string;
  key?: string;
  user?: string;
  password?: string;
  'password-file'?: string;
}

/**
 * Checks the etcd flags together (files readable, --cert with --key, one password) before any work; with async
 * calls only, so that SIGTERM still stops a program whose file system does not answer.
 */
export async function etcdConnection(args: EtcdArgs): Promise<EtcdConnection> {
  const endpoints = parseEndpoints(args.endpoints);
  if ((args.cert === undefined) !== (args.key === undefined)) {
    throw new UsageError('--cert and --key go together: give both for client-certificate auth, or neither');
  }
  const tls: TlsMaterial = {};
  for (const [flag, part] of [
    ['cacert', 'ca'],
    ['cert', 'cert'],
    ['key', 'key'],
  ] as const) {
    const path = args[flag];
    if (path === undefined) continue;
    await checkReadableFile(path, `--${flag}`);
    tls[part] = await readFile(path);
  }
  return { endpoints, cacert: args.cacert, cert: args.cert, key: args.key, tls, ...(await credentials(args)) };
}

async function credentials(args: EtcdArgs): Promise<{ username?: string; password?: string }> {
  const at = args.user?.indexOf(':') ?? -1;
  const username = at < 0 ? args.user : args.user?.slice(0, at);
  const passwords = [
    at < 0 ? undefined : args.user?.slice(at + 1),
    args.password,
    args['password-file'] === undefined ? undefined : await readPasswordFile(args['password-file']),
  ].filter((p) => p !== undefined);
  if (passwords.length > 1) {
    throw new UsageError(
      'the etcd password is given more than one way (--user NAME:PASSWORD, --password, --password-file): give one',
    );
  }
  if (passwords.length > 0 && !username) throw new UsageError('an etcd password needs --user NAME: add it');
  return username ? { username, password: passwords[0] ?? '' } : {};
}

async function readPasswordFile(path: string): Promise<string> {
  await checkReadableFile(path, '--password-file');
  // A file written with echo or an editor ends in a newline that is not part of the password.
  return (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
}

async function checkReadableFile(path: string, flag: string): Promise<void> {
  try {
    await access(path, constants.R_OK);
    if (!(await stat(path)).isFile()) throw Object.assign(new Error(), { code: 'not a file' });
  } catch (err) {
    throw new UsageError(
      `${flag} ${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err}); give the path of a readable file`,
    );
  }
}
