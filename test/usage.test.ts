import { cp, mkdir, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCluster, type TestCluster } from '@etcd-steward/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ebrStoreDir } from './fixtures.js';
import { type ProgramResult, runProgram, startProgram } from './run-program.js';
import { tempDir } from './temp-dir.js';

const path = tempDir('usage-');

/** A usage error: exit 2 and one JSON line on stderr (the tests' stderr is not a terminal); its message. */
function usageError(result: ProgramResult): string {
  expect({ code: result.code, stderr: result.stderr }).toMatchObject({ code: 2 });
  const lines = result.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  const line = JSON.parse(lines[0]) as { level: string; msg: string };
  expect(line.level).toBe('error');
  return line.msg;
}

async function config(name: string, text: string): Promise<string> {
  await writeFile(path(name), text);
  return path(name);
}

describe('etcd-restore --dry-run, in every spelling and from every source', () => {
  let store: string;
  let dataDir: string;
  beforeAll(async () => {
    await cp(ebrStoreDir, path('store'), { recursive: true });
    store = `file://${path('store')}`;
    dataDir = path('data-dir');
    await mkdir(dataDir);
    await writeFile(join(dataDir, 'keep'), 'mine');
  });
  // With --force a restore that is not a dry run replaces the data dir: it must stay as it was.
  const restore = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runProgram('etcd-restore', ['--store', store, '--data-dir', dataDir, '--force', '--output', 'json', ...args], env);
  const untouched = async () => expect(await readdir(dataDir)).toEqual(['keep']);

  it.each(['1', 'yes', 'TRUE', 'on', 'True'])('--dry-run=%s plans and changes nothing', async (spelling) => {
    const result = await restore([`--dry-run=${spelling}`]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toHaveProperty('chains');
    await untouched();
  });

  it.each(['1', 'yes', 'on', 'TRUE', 'True'])('ETCD_STEWARD_DRY_RUN=%s plans and changes nothing', async (spelling) => {
    const result = await restore([], { ETCD_STEWARD_DRY_RUN: spelling });
    expect(result.code).toBe(0);
    await untouched();
  });

  it.each(['yes', 'on', '1', 'true'])('dry-run: %s in --config plans and changes nothing', async (spelling) => {
    const file = await config(`dry-run-${spelling}.yaml`, `dry-run: ${spelling}\n`);
    const result = await restore(['--config', file]);
    expect(result.code).toBe(0);
    await untouched();
  });

  it('refuses any other value from any source with exit 2, naming where it came from', async () => {
    expect(usageError(await restore(['--dry-run=maybe']))).toMatch(/--dry-run "maybe" is not true or false/);
    expect(usageError(await restore([], { ETCD_STEWARD_DRY_RUN: 'maybe' }))).toMatch(
      /ETCD_STEWARD_DRY_RUN="maybe" is not true or false/,
    );
    const file = await config('dry-run-maybe.yaml', 'dry-run: maybe\n');
    expect(usageError(await restore(['--config', file]))).toMatch(
      new RegExp(`dry-run \\(--config ${file} line 1, column 1\\) is not true or false`),
    );
    await untouched();
  });
});

describe('--config', () => {
  it('names the file, line and column of a YAML error, never its text (it may hold a password)', async () => {
    const file = await config('broken.yaml', 'store: file:///tmp/x\npassword: "s3cret-in-file\n');
    const result = await runProgram('etcd-restore', ['--config', file]);
    expect(usageError(result)).toMatch(new RegExp(`--config ${file} line 3, column 1: not valid YAML`));
    expect(result.stderr).not.toContain('s3cret');
  });

  it('says the file must be a flat map when it nests a setting or is a list', async () => {
    const nested = await config('nested.yaml', 'store:\n  url: file:///tmp/x\n');
    expect(usageError(await runProgram('etcd-snapshot', ['list', '--config', nested]))).toMatch(
      new RegExp(
        `store \\(--config ${nested} line 1, column 1\\) holds a nested list or map: .*flat map of flag names`,
      ),
    );
    const list = await config('list.yaml', '- store\n- file:///tmp/x\n');
    expect(usageError(await runProgram('etcd-snapshot', ['list', '--config', list]))).toMatch(
      /line 1, column 1: the config file must be a flat map of flag names to values/,
    );
  });

  it('refuses an unknown setting with a suggestion', async () => {
    const file = await config('typo.yaml', 'store: file:///tmp/x\ndata_dir: /tmp/y\n');
    expect(usageError(await runProgram('etcd-restore', ['--config', file]))).toMatch(
      /data_dir \(--config .* line 2, column 1\) is not a setting: did you mean data-dir\?/,
    );
  });
});

describe('flags', () => {
  it('numbers: says what was given and where', async () => {
    const store = ['--store', `file://${path('none')}`];
    expect(usageError(await runProgram('etcd-snapshot', ['run', ...store, '--server-port', 'abc']))).toMatch(
      /--server-port "abc" is not a number/,
    );
    const env = { ETCD_STEWARD_TO_REVISION: 'abc' };
    expect(usageError(await runProgram('etcd-restore', [...store, '--data-dir', path('dd')], env))).toMatch(
      /ETCD_STEWARD_TO_REVISION="abc" is not a number/,
    );
    const zero = { ETCD_STEWARD_TO_REVISION: '0' };
    expect(usageError(await runProgram('etcd-restore', [...store, '--data-dir', path('dd')], zero))).toMatch(
      /ETCD_STEWARD_TO_REVISION="0" is not a revision/,
    );
  });

  it('unknown flags: did you mean, even when a required flag is missing too', async () => {
    expect(usageError(await runProgram('etcd-restore', ['--to-revison', '5', '--data_dir', 'x']))).toMatch(
      /unknown argument --to-revison \(did you mean --to-revision\?\); unknown argument --data_dir \(did you mean --data-dir\?\)/,
    );
    expect(usageError(await runProgram('etcd-snapshot', ['save', '--endpoint', 'http://127.0.0.1:1']))).toMatch(
      /unknown argument --endpoint \(did you mean --endpoints\?\)/,
    );
  });

  it('a mistyped command is named, with the nearest one, in every program that has commands', async () => {
    const store = `file://${path('none')}`;
    const cases: [string, string[], RegExp][] = [
      [
        'etcd-validate',
        ['chek', '--data-dir', path('dd')],
        /^etcd-validate has no command "chek": did you mean check\?/,
      ],
      ['etcd-snapshot', ['sav', '--store', store], /^etcd-snapshot has no command "sav": did you mean save\?/],
      [
        'etcd-copy-backups',
        ['exprot', '--from', store, '--to', path('out.tar')],
        /^etcd-copy-backups has no command "exprot": did you mean export\? Its commands: copy, export, import, verify/,
      ],
      [
        'etcd-validate',
        ['--data-dir', path('dd')],
        /^etcd-validate needs a command first: one of check, bootstrap, promote/,
      ],
    ];
    for (const [program, args, message] of cases) expect(usageError(await runProgram(program, args))).toMatch(message);
    await expect(readdir(path('out.tar'))).rejects.toThrow(/ENOENT/);
  });

  it('a flag with choices refuses another value, naming them', async () => {
    const args = ['--store', `file://${path('a')}`, '--data-dir', path('dd'), '--verify', 'etcd-please'];
    expect(usageError(await runProgram('etcd-restore', args))).toMatch(
      /Argument: verify, Given: "etcd-please", Choices: "check", "etcd"/,
    );
  });

  it('a single-valued flag given twice is refused, not joined or overridden', async () => {
    const args = ['--store', `file://${path('a')}`, '--data-dir', path('dd1'), '--data-dir', path('dd2')];
    expect(usageError(await runProgram('etcd-restore', args))).toMatch(/--data-dir is given more than once/);
    const endpoints = ['save', '--store', `file://${path('a')}`, '--endpoints', 'a:1', '--endpoints', 'b:1'];
    expect(usageError(await runProgram('etcd-snapshot', endpoints))).toMatch(/--endpoints is given more than once/);
  });

  it('a file:// store refuses query options, as the other stores refuse unknown ones', async () => {
    expect(usageError(await runProgram('etcd-snapshot', ['list', '--store', `file://${path('a')}?regoin=x`]))).toMatch(
      /unknown option regoin/,
    );
  });

  it('names the path that is in the way, and the flag the user gave', async () => {
    await writeFile(path('afile'), '');
    const store = ['--store', `file://${path('a')}`];
    expect(usageError(await runProgram('etcd-restore', [...store, '--data-dir', path('afile', 'dd')]))).toMatch(
      `--data-dir ${path('afile', 'dd')} cannot be created: ${path('afile')} is not a directory`,
    );
    const peer = ['--data-dir', path('dd'), '--initial-advertise-peer-urls', '127.0.0.1:47314'];
    const message = usageError(await runProgram('etcd-restore', [...store, ...peer]));
    expect(message).toMatch(/--initial-advertise-peer-urls "127.0.0.1:47314" must be http\(s\):\/\/host:port/);
    expect(message).not.toMatch(/initial-cluster/);
  });

  // Refused before anything is made: the store folder is never created.
  const store = `file://${join(tmpdir(), 'usage-test-no-store')}`;
  it.each([
    ['etcd-restore', ['--store', store, '--data-dir', '/proc/etcd/data'], /--data-dir/],
    ['etcd-snapshot', ['save', '--store', 'file:///proc/etcd-backups'], /--store/],
    ['etcd-snapshot', ['save', '--store', store, '--temp-dir', '/sys/kernel'], /--temp-dir/],
  ])(
    '%s %j: a path under /proc or /sys is refused at once',
    async (program, args, flag) => {
      // A program that hangs there (as a mkdir under /proc does) is killed, not left behind.
      const child = startProgram(program, args);
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk;
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const code = await Promise.race([exited, sleep(10_000).then(() => 'hung' as const)]);
      if (code === 'hung') {
        child.kill('SIGKILL');
        await exited;
      }
      const message = usageError({ code: code === 'hung' ? -1 : (code ?? -1), stdout: '', stderr });
      expect(message).toMatch(flag);
      expect(message).toMatch(/is under \/(proc|sys), which holds no files/);
    },
    20_000,
  );
});

describe('etcd TLS files and endpoints (a real etcd)', () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  const save = (args: string[]) =>
    runProgram('etcd-snapshot', ['save', '--store', `file://${path('tls-store')}`, ...args]);

  it('checks --cacert, --cert and --key before connecting, whatever the scheme', async () => {
    const endpoint = ['--endpoints', cluster.endpoints[0]];
    expect(usageError(await save([...endpoint, '--cacert', path('no-ca.pem')]))).toMatch(
      /--cacert .*no-ca.pem: cannot read the file \(ENOENT\)/,
    );
    await writeFile(path('client.pem'), 'not a certificate');
    expect(usageError(await save([...endpoint, '--cert', path('client.pem')]))).toMatch(/--cert and --key go together/);
    expect(usageError(await save([...endpoint, '--key', path('client.pem')]))).toMatch(/--cert and --key go together/);
    expect(usageError(await save([...endpoint, '--temp-dir', path('no-such-dir')]))).toMatch(
      /--temp-dir .*no-such-dir does not exist/,
    );
    await expect(readdir(path('tls-store'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses an endpoint without a port, with a path or query, or with user info, before connecting', async () => {
    // without the port gRPC dialled 80 and timed out; a path was dropped without a word
    expect(usageError(await save(['--endpoints', '127.0.0.1']))).toMatch(
      /--endpoints: "http:\/\/127.0.0.1" has no port; etcd's client port is usually 2379: write http:\/\/127.0.0.1:2379/,
    );
    expect(usageError(await save(['--endpoints', `https://etcd-main-client`]))).toMatch(/has no port/);
    expect(usageError(await save(['--endpoints', `${cluster.endpoints[0]}/v3/kv`]))).toMatch(
      new RegExp(`has a path, query or fragment, which etcd's gRPC does not use: write ${cluster.endpoints[0]}$`),
    );
    expect(usageError(await save(['--endpoints', `${cluster.endpoints[0]}?timeout=5s`]))).toMatch(/has a path, query/);
    const userInfo = usageError(await save(['--endpoints', 'http://root:s3cret@127.0.0.1:2379']));
    expect(userInfo).toMatch(/holds user info .*--user .*--password-file/);
    expect(userInfo).not.toMatch(/s3cret/);
    await expect(readdir(path('tls-store'))).rejects.toThrow(/ENOENT/);
  });

  it('takes a bare host:port endpoint as http://host:port, as etcdctl does', async () => {
    const bare = cluster.endpoints[0].replace(/^http:\/\//, '');
    const result = await save(['--endpoints', bare, '--output', 'json']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).revision).toBeGreaterThan(0);
  });
});

describe('--log-level, from every source', () => {
  let store: string;
  beforeAll(async () => {
    await cp(ebrStoreDir, path('level-store'), { recursive: true });
    store = `file://${path('level-store')}`;
  });
  let runs = 0;
  /** A restore logs what it does at info; its JSON log lines on stderr, by level. */
  const restoreLevels = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const dataDir = path(`level-data-${runs++}`);
    const result = await runProgram('etcd-restore', ['--store', store, '--data-dir', dataDir, ...args], env);
    expect(result).toMatchObject({ code: 0 });
    return result.stderr
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { level: string }).level);
  };

  it('shows info and progress lines by default', async () => {
    expect(await restoreLevels([])).toEqual(expect.arrayContaining(['info', 'progress']));
  });

  it('warn from the command line, ETCD_STEWARD_LOG_LEVEL or --config leaves them out', async () => {
    expect(await restoreLevels(['--log-level', 'warn'])).toEqual([]);
    expect(await restoreLevels([], { ETCD_STEWARD_LOG_LEVEL: 'warn' })).toEqual([]);
    expect(await restoreLevels(['--config', await config('level.yaml', 'log-level: warn\n')])).toEqual([]);
  });

  it('from the command line wins over the environment, which wins over --config', async () => {
    const file = await config('level-info.yaml', 'log-level: info\n');
    expect(await restoreLevels(['--config', file], { ETCD_STEWARD_LOG_LEVEL: 'warn' })).toEqual([]);
    expect(await restoreLevels(['--log-level', 'info'], { ETCD_STEWARD_LOG_LEVEL: 'warn' })).toContain('info');
  });
});

describe('an ETCD_STEWARD_ variable that names no flag', () => {
  it.each([
    ['etcd-snapshot', ['list']],
    ['etcd-restore', []],
    ['etcd-validate', ['check']],
    ['etcd-compact', []],
    ['etcd-gc', []],
    ['etcd-copy-backups', []],
  ])('%s %j warns, naming the variable it is nearest to, never its value', async (program, args) => {
    const result = await runProgram(program, args, { ETCD_STEWARD_LOGLEVEL: 'secret-value' });
    const lines = result.stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { level: string; msg: string });
    expect(lines[0]).toEqual({
      time: expect.any(String),
      level: 'warn',
      msg: 'ETCD_STEWARD_LOGLEVEL names no flag of this command and is ignored: did you mean ETCD_STEWARD_LOG_LEVEL?',
    });
    expect(result.stderr).not.toContain('secret-value');
  });

  it('is not warned of when it is a flag of the command, or at --log-level error', async () => {
    const known = await runProgram('etcd-snapshot', ['list'], { ETCD_STEWARD_STORE: `file://${path('no-store')}` });
    expect(known.stderr).not.toMatch(/names no flag/);
    const quiet = await runProgram('etcd-restore', ['--log-level', 'error'], { ETCD_STEWARD_STOR: 'x' });
    expect(quiet.stderr).not.toMatch(/names no flag/);
  });
});
