import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { OperationError } from '../common/errors.js';
import { freePort } from '../common/free-port.js';
import { http } from '../common/node-http.js';
import type { EtcdBinaries } from './etcd-binaries.js';

/** One etcd member run as a child process on loopback. */
export interface EtcdMemberOptions {
  binaries: EtcdBinaries;
  name: string;
  dataDir: string;
  /** etcd's own log goes here, so a failure can show its last lines. */
  logFile: string;
  clientPort?: number;
  peerPort?: number;
  /** `name=peerURL,...`; defaults to this member alone. */
  initialCluster?: string;
  clusterState?: 'new' | 'existing';
  clusterToken?: string;
  /** A member nobody else relies on (restore, compact): skip fsync where etcd supports it. */
  throwaway?: boolean;
  extraArgs?: string[];
  /** Serve clients over TLS and demand client certificates (PEM file paths). */
  clientTls?: ClientTls;
  /** etcd's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

export interface ClientTls {
  cert: string;
  key: string;
  ca: string;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export class EtcdProcess {
  private exited: Promise<number | null>;

  private constructor(
    readonly name: string,
    readonly clientUrl: string,
    readonly peerUrl: string,
    readonly dataDir: string,
    readonly logFile: string,
    private readonly child: ChildProcess,
    private readonly tls?: ClientTls,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ? null : code)));
    this.exited.then(() => running.delete(child));
  }

  static async start(options: EtcdMemberOptions): Promise<EtcdProcess> {
    const clientPort = options.clientPort ?? (await freePort());
    const peerPort = options.peerPort ?? (await freePort());
    const clientUrl = `${options.clientTls ? 'https' : 'http'}://127.0.0.1:${clientPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const args = [
      `--name=${options.name}`,
      `--data-dir=${options.dataDir}`,
      `--listen-client-urls=${clientUrl}`,
      `--advertise-client-urls=${clientUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=${options.initialCluster ?? `${options.name}=${peerUrl}`}`,
      `--initial-cluster-state=${options.clusterState ?? 'new'}`,
      `--initial-cluster-token=${options.clusterToken ?? 'etcd-steward'}`,
      // Restores and replays must never stop at the default 2 GiB NOSPACE alarm.
      '--quota-backend-bytes=8589934592',
      '--max-request-bytes=10485760',
      ...(options.throwaway && options.binaries.supportsNoFsync ? ['--unsafe-no-fsync'] : []),
      ...(options.clientTls
        ? [
            `--cert-file=${options.clientTls.cert}`,
            `--key-file=${options.clientTls.key}`,
            `--trusted-ca-file=${options.clientTls.ca}`,
            '--client-cert-auth',
          ]
        : []),
      ...(options.extraArgs ?? []),
    ];
    const log = createWriteStream(options.logFile, { flags: 'a' });
    const child = spawn(options.binaries.etcd, args, {
      env: withoutEtcdFlags(options.env ?? process.env),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    running.add(child);
    return new EtcdProcess(
      options.name,
      clientUrl,
      peerUrl,
      options.dataDir,
      options.logFile,
      child,
      options.clientTls,
    );
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Waits until the member reports healthy (it has a leader and no alarm). */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let exitCode: number | null | undefined;
    this.exited.then((code) => {
      exitCode = code;
    });
    while (Date.now() < deadline) {
      if (exitCode !== undefined) {
        throw new OperationError(
          `etcd ${this.name} exited (code ${exitCode}) while starting: ${await this.lastLogLine()}`,
        );
      }
      if (await this.healthy()) return;
      await sleep(100);
    }
    throw new OperationError(
      `etcd ${this.name} did not become healthy within ${timeoutMs / 1000}s: ${await this.lastLogLine()}`,
    );
  }

  /** etcd's /health says true: the member has a leader and no alarm. */
  private healthy(): Promise<boolean> {
    const tls = this.tlsOptions();
    return new Promise((resolve) => {
      const req = (tls ? https : http).get(`${this.clientUrl}/health`, { timeout: 2000, ...tls }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(/"health":\s*"?true/.test(body)));
      });
      req.on('error', () => resolve(false));
      req.on('timeout', () => req.destroy());
    });
  }

  /**
   * The number of keys, now or at `revision`, and the store's revision, through etcd's JSON gateway: a
   * caller with nothing more to ask needs no gRPC client (etcd3 and grpc-js cost ~20 MB to load).
   */
  async keyCount(revision?: number): Promise<{ keys: number; revision: number }> {
    const all = Buffer.from([0]).toString('base64');
    const body = JSON.stringify({ key: all, range_end: all, count_only: true, ...(revision ? { revision } : {}) });
    const text = await this.post('/v3/kv/range', body);
    let res: { header?: { revision?: string }; count?: string; error?: string; message?: string };
    try {
      res = JSON.parse(text);
    } catch {
      throw new OperationError(`etcd ${this.name} answered a range with what is not JSON: ${text.slice(0, 200)}`);
    }
    if (res.header?.revision === undefined) {
      throw new OperationError(`etcd ${this.name} did not answer a range: ${res.message ?? res.error ?? 'no header'}`);
    }
    // proto3 JSON leaves zero out, and writes 64-bit integers as strings.
    return { keys: Number(res.count ?? 0), revision: Number(res.header.revision) };
  }

  private post(path: string, body: string): Promise<string> {
    const tls = this.tlsOptions();
    return new Promise((resolve, reject) => {
      const req = (tls ? https : http).request(
        `${this.clientUrl}${path}`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, timeout: 60_000, ...tls },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve(text));
          // etcd dying mid-answer (killed by a memory limit, say) fails the request, not the process.
          res.on('error', (err) =>
            reject(new OperationError(`etcd ${this.name} broke off its answer to ${path}: ${err.message}`)),
          );
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new OperationError(`etcd ${this.name} did not answer ${path} in 60 s`)));
      req.end(body);
    });
  }

  private tlsOptions(): https.RequestOptions | undefined {
    return (
      this.tls && {
        ca: readFileSync(this.tls.ca),
        cert: readFileSync(this.tls.cert),
        key: readFileSync(this.tls.key),
      }
    );
  }

  /** SIGTERM, then SIGKILL if etcd has not exited after `graceMs`. Resolves with the exit code (null if killed). */
  async stop(graceMs = 10_000): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.exited;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  kill(): Promise<number | null> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  async lastLogLine(): Promise<string> {
    try {
      const lines = (await readFile(this.logFile, 'utf8')).trim().split('\n');
      const errors = lines.filter((l) => /\b(E|C|F)\s*\||"level":"(error|fatal|panic)"|panic:/.test(l));
      return (errors.at(-1) ?? lines.at(-1) ?? '(no log)').slice(0, 500);
    } catch {
      return '(no log)';
    }
  }
}

/**
 * etcd takes every `ETCD_<FLAG>` variable as that flag (`ETCD_VERSION=3.5` makes it fail on `--version`), and a
 * member we start is configured by its arguments alone: the caller's ETCD_* variables are left out, but for
 * ETCD_UNSUPPORTED_ARCH, without which etcd 3.4 does not start on arm64.
 */
function withoutEtcdFlags(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => !name.startsWith('ETCD_') || name === 'ETCD_UNSUPPORTED_ARCH'),
  );
}
