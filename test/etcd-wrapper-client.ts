import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findEtcdBinaries } from '@etcd-steward/core';
import { parse } from 'yaml';

/**
 * What gardener/etcd-wrapper does before and around the etcd it embeds, call for call, with a real `etcd
 * --config-file` in place of its embedded one (docs/etcd-wrapper.md lists each step beside the wrapper's source,
 * read at v0.1.0 and v0.7.0 and the main branch of June 2026, which do the same):
 *
 * 1. the validation mode: the legacy `validation_marker` file of the data volume removed; `sanity` when the file
 *    `exit_code` there holds `terminated` or `interrupt` (trimmed), else `full`;
 * 2. `GET /initialization/status` in a loop: a non-200 answer or a failed request counts as not done; `New`
 *    makes it `GET /initialization/start?mode=<mode>`; `Successful` ends the loop; anything else (`Progress`,
 *    `Failed`) is asked again. Each round ends with a 1 s wait, the one that saw `Successful` too;
 * 3. `GET /config`, up to 5 tries with 1 s after each failure (a non-200 answer is one); the body written to a
 *    file (mode 0600) and etcd started on it;
 * 4. once etcd is ready, `exit_code` removed; when the wrapper is stopped by a signal, the signal's name
 *    (`terminated` for SIGTERM) written to `exit_code` before etcd stops.
 *
 * Every request is a GET with no body, no credentials and a 1 minute timeout, as the wrapper's HTTP client sends.
 */
export class EtcdWrapperClient {
  /** Every request sent, in order, as `<path and query> <status or error>`. */
  readonly calls: string[] = [];
  private etcd?: ChildProcess;
  private exited?: Promise<number | null>;

  constructor(
    private readonly options: {
      /** The sidecar's base URL (the wrapper's --backup-restore-host-port with its scheme). */
      sidecar: string;
      /** The data volume: `exit_code` and `validation_marker` live here (/var/etcd/data in the pod). */
      dataVolume: string;
      /** Where the served config is written (the wrapper: `$HOME/etcd.conf.yaml`). */
      configFile: string;
      logFile: string;
      /** How long to wait for the initialization to succeed, and for etcd to be ready. */
      timeoutMs?: number;
    },
  ) {}

  get exitCodeFile(): string {
    return join(this.options.dataVolume, 'exit_code');
  }

  /** Step 1: the mode the wrapper asks for. */
  async validationMode(): Promise<'full' | 'sanity'> {
    await rm(join(this.options.dataVolume, 'validation_marker'), { force: true });
    const marker = await readFile(this.exitCodeFile, 'utf8').catch(() => undefined);
    const trimmed = marker?.trim();
    return trimmed === 'terminated' || trimmed === 'interrupt' ? 'sanity' : 'full';
  }

  /** Steps 1 to 3: the served config, written to the config file; the mode it asked for. */
  async initialize(): Promise<{ mode: 'full' | 'sanity' | undefined; config: Record<string, unknown> }> {
    const deadline = Date.now() + (this.options.timeoutMs ?? 180_000);
    let mode: 'full' | 'sanity' | undefined;
    for (let status = ''; status !== 'Successful'; ) {
      if (Date.now() > deadline)
        throw new Error(`initialization did not succeed in time: ${this.calls.slice(-5).join('; ')}`);
      status = (await this.get('/initialization/status'))?.body ?? '';
      if (status === 'New') {
        mode = await this.validationMode();
        await this.get(`/initialization/start?mode=${mode}`);
      }
      await sleep(1_000);
    }
    let body: string | undefined;
    for (let attempt = 0; attempt < 5 && body === undefined; attempt++) {
      body = (await this.get('/config'))?.body;
      if (body === undefined) await sleep(1_000);
    }
    if (body === undefined) throw new Error(`/config failed 5 times: ${this.calls.slice(-5).join('; ')}`);
    await writeFile(this.options.configFile, body, { mode: 0o600 });
    return { mode, config: parse(body) };
  }

  /**
   * Steps 1 to 4: etcd started on the served config and ready; its client URL. `beforeEtcd` runs between the config
   * and etcd's start, for a test to act there without racing etcd.
   */
  async start(
    beforeEtcd?: () => Promise<void>,
  ): Promise<{ mode: 'full' | 'sanity' | undefined; config: Record<string, unknown>; clientUrl: string }> {
    const { mode, config } = await this.initialize();
    await beforeEtcd?.();
    const binaries = await findEtcdBinaries();
    const log = createWriteStream(this.options.logFile, { flags: 'a' });
    const child = spawn(binaries.etcd, ['--config-file', this.options.configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    this.etcd = child;
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    const clientUrl = String(config['listen-client-urls']).split(',')[0].replace('0.0.0.0', '127.0.0.1');
    const deadline = Date.now() + (this.options.timeoutMs ?? 180_000);
    for (;;) {
      if (child.exitCode !== null) {
        throw new Error(
          `etcd exited with ${child.exitCode}: ${(await readFile(this.options.logFile, 'utf8')).slice(-3000)}`,
        );
      }
      // etcd serves its client URLs only once its server is ready (the wrapper waits for the same ReadyNotify);
      // /version answers then, for a learner too
      const version = await fetch(`${clientUrl}/version`, { signal: AbortSignal.timeout(2_000) }).catch(
        () => undefined,
      );
      if (version?.ok) break;
      if (Date.now() > deadline) throw new Error(`etcd did not become ready: see ${this.options.logFile}`);
      await sleep(200);
    }
    await rm(this.exitCodeFile, { force: true });
    return { mode, config, clientUrl };
  }

  /** As the wrapper on SIGTERM: `terminated` into exit_code, then etcd stopped. */
  async stop(): Promise<void> {
    if (!this.etcd) return;
    await writeFile(this.exitCodeFile, 'terminated', { mode: 0o600 });
    this.etcd.kill('SIGTERM');
    await this.exited;
    this.etcd = undefined;
  }

  /** A crash: etcd killed, nothing written. */
  async kill(): Promise<void> {
    if (!this.etcd) return;
    this.etcd.kill('SIGKILL');
    await this.exited;
    this.etcd = undefined;
  }

  private async get(path: string): Promise<{ body: string } | undefined> {
    try {
      const response = await fetch(`${this.options.sidecar}${path}`, { signal: AbortSignal.timeout(60_000) });
      const body = await response.text();
      this.calls.push(`${path} ${response.status}${response.ok ? '' : ` ${body.slice(0, 200)}`}`);
      return response.ok ? { body } : undefined;
    } catch (err) {
      this.calls.push(`${path} ${(err as Error).message}`);
      return undefined;
    }
  }
}
