/**
 * A real Prometheus (Debian's `prometheus` package, which scripts/setup installs) on 127.0.0.1, as a child process
 * with its data in a folder of the caller's, scraping and evaluating every second so that a test sees alerts in
 * seconds rather than minutes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '@etcd-steward/core';
import { stringify } from 'yaml';

export interface PrometheusServer {
  url: string;
  /** Alerts as /api/v1/alerts lists them (pending and firing). */
  alerts(): Promise<{ labels: Record<string, string>; state: string }[]>;
  /** The value of an instant query's first sample, or undefined when it has none. */
  query(expr: string): Promise<number | undefined>;
  stop(): Promise<void>;
}

export interface ScrapeTarget {
  /** host:port */
  address: string;
  labels: Record<string, string>;
}

export async function startPrometheus(options: {
  dir: string;
  targets: ScrapeTarget[];
  /** The rule files' contents, by file name. */
  rules: Record<string, string>;
}): Promise<PrometheusServer> {
  await mkdir(options.dir, { recursive: true });
  for (const [name, text] of Object.entries(options.rules)) await writeFile(join(options.dir, name), text);
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: Object.keys(options.rules),
    scrape_configs: options.targets.map((t, i) => ({
      job_name: `target-${i}`,
      static_configs: [{ targets: [t.address], labels: t.labels }],
    })),
  };
  await writeFile(join(options.dir, 'prometheus.yml'), stringify(config));
  const port = await freePort();
  const log = createWriteStream(join(options.dir, 'prometheus.log'));
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(options.dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(options.dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { cwd: options.dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  const api = async (path: string) => {
    const answer = (await (await fetch(`${url}${path}`)).json()) as { status: string; data: unknown };
    if (answer.status !== 'success') throw new Error(`Prometheus ${path}: ${JSON.stringify(answer)}`);
    return answer.data;
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}; see ${options.dir}`);
    if ((await fetch(`${url}/-/ready`).catch(() => undefined))?.ok) break;
    if (i > 600) {
      await stop();
      throw new Error('prometheus did not get ready in 60 s');
    }
    await sleep(100);
  }
  return {
    url,
    stop,
    alerts: async () =>
      ((await api('/api/v1/alerts')) as { alerts: { labels: Record<string, string>; state: string }[] }).alerts,
    async query(expr) {
      const data = (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)) as {
        result: { value: [number, string] }[];
      };
      return data.result.length ? Number(data.result[0].value[1]) : undefined;
    },
  };
}
