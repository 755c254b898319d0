// Runs a command and measures what a benchmark table reports: wall time and the peak resident memory of
// the whole process tree (the program and anything it spawns), sampled from /proc.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export interface Measurement {
  seconds: number;
  peakRssMb: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function treeRssKb(pid: number): number {
  return rssKb(pid) + childrenOf(pid).reduce((sum, child) => sum + treeRssKb(child), 0);
}

export function measure(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Measurement> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let peak = 0;
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setInterval(() => {
      if (child.pid) peak = Math.max(peak, treeRssKb(child.pid));
    }, 10);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(timer);
      resolve({
        seconds: Number(process.hrtime.bigint() - started) / 1e9,
        peakRssMb: peak / 1024,
        code,
        stdout,
        stderr,
      });
    });
  });
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export function printTable(rows: string[][]): void {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows)
    console.log(r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
}
