// Runs a command and measures what a benchmark table reports: wall time and the peak resident memory of
// the whole process tree (the program and anything it spawns), sampled from /proc every 10 ms — in total
// and anonymous only, per process (by role) and per phase of the run. Optionally the command runs in a
// memory cgroup (v1) with a limit, as a Kubernetes container with `resources.limits.memory` would.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { type CgroupReport, createMemoryCgroup } from './memory-cgroup.ts';

/** Resident memory in MB (MiB): one sample, or each quantity's peak over many. */
export interface MemoryPeak {
  rssMb: number;
  anonMb: number;
  /** File-backed (mapped files, the program's own binary): pages the kernel may drop under pressure. */
  fileMb: number;
}

export interface Measurement {
  seconds: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Peak of the sum over the tree; each peak is its own maximum (anon and total need not peak together). */
  peakRssMb: number;
  /**
   * User + system CPU of the whole tree, as last sampled from /proc (every 10 ms): what each process had used when
   * last seen, so up to 10 ms of each is missed.
   */
  cpuSeconds: number;
  peakAnonMb: number;
  /** Per process role (`roleOf`): the largest RSS, anon and file RSS any process of that role had. */
  processes: Map<string, MemoryPeak>;
  /** Per phase (`phaseOf`), in order: its duration and the tree's peaks while it lasted. */
  phases: Array<{ name: string; seconds: number } & MemoryPeak>;
  /** When run with `memoryLimitBytes`: what the cgroup saw. */
  cgroup?: CgroupReport;
}

export interface MeasureOptions {
  env?: NodeJS.ProcessEnv;
  /** Names a phase that starts at this stderr line, or undefined; the first phase is "start". */
  phaseOf?: (line: string) => string | undefined;
  /** Run in a fresh memory cgroup with this limit (bytes). */
  memoryLimitBytes?: number;
  /** Stops the command with SIGTERM (a long-running one: the sidecar); the measurement ends when it has exited. */
  signal?: AbortSignal;
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

/** A process and all its descendants, now. */
export function treePids(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(treePids)];
}

/** A process's user + system CPU so far in seconds, from /proc (clock ticks of 10 ms); undefined once it is gone. */
function cpuOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name, which is in parentheses and may hold spaces: utime and stime are 14 and 15
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** A process's resident memory now, from /proc; undefined once it is gone. */
export function residentMemory(pid: number): MemoryPeak | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
    return { rssMb: mb('VmRSS'), anonMb: mb('RssAnon'), fileMb: mb('RssFile') + mb('RssShmem') };
  } catch {
    return undefined;
  }
}

/** A process's role from its command line: etcd's programs by name, node scripts by their entry file. */
export function roleOf(pid: number, root: number): string {
  let argv: string[] = [];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return 'gone';
  }
  if (argv.length === 0) return '?'; // exiting, or between fork and exec
  const program = basename(argv[0]);
  if (program !== 'node') return pid === root ? `${program} (main)` : program;
  const script = argv.slice(1).find((a) => !a.startsWith('-'));
  const name = script ? basename(script).replace(/\.[cm]?js$/, '') : 'node';
  if (pid === root) return `${name} (main)`;
  return roleOf(root, root) === `${name} (main)` ? `${name} (a fork, before its exec)` : name;
}

/** Each quantity's maximum of the two. */
export const peakOf = (a: MemoryPeak | undefined, s: MemoryPeak): MemoryPeak => ({
  rssMb: Math.max(a?.rssMb ?? 0, s.rssMb),
  anonMb: Math.max(a?.anonMb ?? 0, s.anonMb),
  fileMb: Math.max(a?.fileMb ?? 0, s.fileMb),
});

/** The resident memory of a process and all its descendants now, summed; undefined once it is gone. */
export function treeMemory(pid: number): MemoryPeak | undefined {
  const samples = treePids(pid).flatMap((p) => residentMemory(p) ?? []);
  if (samples.length === 0) return undefined;
  return samples.reduce((a, s) => ({
    rssMb: a.rssMb + s.rssMb,
    anonMb: a.anonMb + s.anonMb,
    fileMb: a.fileMb + s.fileMb,
  }));
}

export function measure(command: string, args: string[], options: MeasureOptions = {}): Promise<Measurement> {
  const cgroup = options.memoryLimitBytes ? createMemoryCgroup(options.memoryLimitBytes) : undefined;
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
    const [cmd, argv] = cgroup ? cgroup.wrap(command, args) : [command, args];
    const child = spawn(cmd, argv, {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      signal: options.signal,
      killSignal: 'SIGTERM',
    });
    const processes = new Map<string, MemoryPeak>();
    const phases: Measurement['phases'] = [];
    let phase = { name: 'start', from: 0, peak: { rssMb: 0, anonMb: 0, fileMb: 0 } as MemoryPeak };
    const endPhase = () => phases.push({ name: phase.name, seconds: elapsed() - phase.from, ...phase.peak });
    let tree: MemoryPeak = { rssMb: 0, anonMb: 0, fileMb: 0 };
    const cpu = new Map<number, number>();
    let stdout = '';
    let stderr = '';
    let partial = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      const lines = (partial + d).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const next = options.phaseOf?.(line);
        if (next === undefined || next === phase.name) continue;
        endPhase();
        phase = { name: next, from: elapsed(), peak: { rssMb: 0, anonMb: 0, fileMb: 0 } };
      }
    });
    const timer = setInterval(() => {
      const root = child.pid;
      if (!root) return;
      const sum: MemoryPeak = { rssMb: 0, anonMb: 0, fileMb: 0 };
      for (const pid of treePids(root)) {
        const used = cpuOf(pid);
        if (used !== undefined) cpu.set(pid, used);
        const s = residentMemory(pid);
        if (!s) continue;
        // Read every time: a process may exec after it was first seen (the cgroup shell, a fork of node).
        const role = roleOf(pid, root);
        if (role !== '?') processes.set(role, peakOf(processes.get(role), s));
        sum.rssMb += s.rssMb;
        sum.anonMb += s.anonMb;
        sum.fileMb += s.fileMb;
      }
      tree = peakOf(tree, sum);
      phase.peak = peakOf(phase.peak, sum);
      cgroup?.sample();
    }, 10);
    child.on('error', (err) => {
      if (err.name === 'AbortError') return; // stopped as asked: 'exit' follows
      clearInterval(timer);
      cgroup?.remove();
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearInterval(timer);
      endPhase();
      const report: CgroupReport | undefined = cgroup?.report();
      cgroup?.remove();
      resolve({
        seconds: elapsed(),
        code,
        signal,
        stdout,
        stderr,
        peakRssMb: tree.rssMb,
        peakAnonMb: tree.anonMb,
        cpuSeconds: [...cpu.values()].reduce((a, b) => a + b, 0),
        processes,
        phases,
        ...(report ? { cgroup: report } : {}),
      });
    });
  });
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export function formatTable(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
}

export function printTable(rows: string[][]): void {
  for (const line of formatTable(rows)) console.log(line);
}
