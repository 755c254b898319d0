/**
 * azurite's blob service on 127.0.0.1, as a child process. `--skipApiVersionCheck` is required: the SDK speaks
 * a newer API version than azurite 3.35 knows, and azurite otherwise refuses every call.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestServer } from './test-server.ts';

export interface AzuriteTestServer extends TestServer {
  /** azurite's well-known development account. */
  account: string;
  accountKey: string;
  pid: number;
}

const ACCOUNT = 'devstoreaccount1';
const ACCOUNT_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

const azuriteBlob = join(
  dirname(createRequire(import.meta.url).resolve('azurite/package.json')),
  'dist/src/blob/main.js',
);

export interface AzuriteOptions {
  /** Keep blobs on disk here (large benchmarks); in memory otherwise. */
  location?: string;
}

export async function startAzurite(options: AzuriteOptions = {}): Promise<AzuriteTestServer> {
  const workDir = await mkdtemp(join(tmpdir(), 'azurite-'));
  const storage = options.location ? ['--location', options.location] : ['--inMemoryPersistence'];
  const child = spawn(
    process.execPath,
    [
      azuriteBlob,
      '--blobHost',
      '127.0.0.1',
      '--blobPort',
      '0',
      '--silent',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      ...storage,
    ],
    { cwd: workDir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const stop = async () => {
    await stopChild(child);
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    const base = await waitForListening(child);
    return { endpoint: `${base}/${ACCOUNT}`, account: ACCOUNT, accountKey: ACCOUNT_KEY, pid: child.pid!, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function waitForListening(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`azurite did not start within 30 s:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /successfully listens on (http:\/\/[\d.]+:\d+)/.exec(output)?.[1];
      if (url) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stdout?.resume(); // keep draining so azurite never blocks on a full pipe
        resolve(url);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`azurite exited with code ${code}:\n${output}`));
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
