// Runs a command and measures what a benchmark table reports: wall time and the peak resident memory of
// the whole process tree (the program and anything it spawns), sampled from /proc every 10 ms — in total
// and anonymous only, per process (by role) and per phase of the run. Optionally the command runs in a
// memory cgroup (v1) with a limit, as a Kubernetes container with `resources.limits.memory` would.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

/** Peaks of one sampled quantity set, in MB (MiB). */
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
  peakAnonMb: number;
  /** Per process role (`roleOf`): the largest RSS, anon and file RSS any process of that role had. */
  processes: Map<string, MemoryPeak>;
  /** Per phase (`phaseOf`), in order: its duration and the tree's peaks while it lasted. */
  phases: Array<{ name: string; seconds: number } & MemoryPeak>;
  /** When run with `memoryLimitBytes`: what the cgroup saw. */
  cgroup?: CgroupReport;
}

export interface CgroupReport {
  limitMb: number;
  /** memory.max_usage_in_bytes: anon plus page cache charged to the group (files written and read too). */
  maxUsageMb: number;
  /** Peak of memory.stat `rss` (anonymous memory of the group), sampled. */
  peakAnonMb: number;
  /** Times the limit was hit (the kernel then reclaimed), and processes the OOM killer ended. */
  failcnt: number;
  oomKills: number;
}

export interface MeasureOptions {
  env?: NodeJS.ProcessEnv;
  /** Names a phase that starts at this stderr line, or undefined; the first phase is "start". */
  phaseOf?: (line: string) => string | undefined;
  /** Run in a fresh memory cgroup with this limit (bytes). */
  memoryLimitBytes?: number;
}

/** The memory cgroup (v1) this machine gives us; limited groups are made under it and removed afterwards. */
const CGROUP_PARENT =
  process.env.BENCH_CGROUP_PARENT ?? '/sys/fs/cgroup/memory/process_api/94c85e362e9c78f440e7930363f2721e';

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

function treePids(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(treePids)];
}

interface Sample {
  rssKb: number;
  anonKb: number;
  fileKb: number;
}

function sample(pid: number): Sample | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
    return { rssKb: kb('VmRSS'), anonKb: kb('RssAnon'), fileKb: kb('RssFile') + kb('RssShmem') };
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

const mb = (kb: number) => kb / 1024;
const peakOf = (a: MemoryPeak | undefined, s: Sample): MemoryPeak => ({
  rssMb: Math.max(a?.rssMb ?? 0, mb(s.rssKb)),
  anonMb: Math.max(a?.anonMb ?? 0, mb(s.anonKb)),
  fileMb: Math.max(a?.fileMb ?? 0, mb(s.fileKb)),
});

export function measure(command: string, args: string[], options: MeasureOptions = {}): Promise<Measurement> {
  const cgroup = options.memoryLimitBytes ? createCgroup(options.memoryLimitBytes) : undefined;
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
    // In a cgroup the command must be in it before it runs anything: a shell joins, then execs it.
    const [cmd, argv] = cgroup
      ? ['/bin/sh', ['-c', `echo $$ > ${cgroup}/cgroup.procs && exec "$0" "$@"`, command, ...args]]
      : [command, args];
    const child = spawn(cmd, argv, { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const processes = new Map<string, MemoryPeak>();
    const phases: Measurement['phases'] = [];
    let phase = { name: 'start', from: 0, peak: { rssMb: 0, anonMb: 0, fileMb: 0 } as MemoryPeak };
    const endPhase = () => phases.push({ name: phase.name, seconds: elapsed() - phase.from, ...phase.peak });
    let tree: MemoryPeak = { rssMb: 0, anonMb: 0, fileMb: 0 };
    let cgroupAnonKb = 0;
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
      const sum: Sample = { rssKb: 0, anonKb: 0, fileKb: 0 };
      for (const pid of treePids(root)) {
        const s = sample(pid);
        if (!s) continue;
        // Read every time: a process may exec after it was first seen (the cgroup shell, a fork of node).
        const role = roleOf(pid, root);
        if (role !== '?') processes.set(role, peakOf(processes.get(role), s));
        sum.rssKb += s.rssKb;
        sum.anonKb += s.anonKb;
        sum.fileKb += s.fileKb;
      }
      tree = peakOf(tree, sum);
      phase.peak = peakOf(phase.peak, sum);
      if (cgroup) cgroupAnonKb = Math.max(cgroupAnonKb, cgroupStat(cgroup).rss / 1024);
    }, 10);
    child.on('error', (err) => {
      clearInterval(timer);
      if (cgroup) removeCgroup(cgroup);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearInterval(timer);
      endPhase();
      let report: CgroupReport | undefined;
      if (cgroup) {
        report = {
          limitMb: (options.memoryLimitBytes ?? 0) / 1048576,
          maxUsageMb: Number(readFileSync(`${cgroup}/memory.max_usage_in_bytes`, 'utf8')) / 1048576,
          peakAnonMb: mb(cgroupAnonKb),
          failcnt: Number(readFileSync(`${cgroup}/memory.failcnt`, 'utf8')),
          oomKills: Number(/oom_kill (\d+)/.exec(readFileSync(`${cgroup}/memory.oom_control`, 'utf8'))?.[1] ?? 0),
        };
        removeCgroup(cgroup);
      }
      resolve({
        seconds: elapsed(),
        code,
        signal,
        stdout,
        stderr,
        peakRssMb: tree.rssMb,
        peakAnonMb: tree.anonMb,
        processes,
        phases,
        ...(report ? { cgroup: report } : {}),
      });
    });
  });
}

function createCgroup(limitBytes: number): string {
  const dir = `${CGROUP_PARENT}/bench-${process.pid}-${Date.now()}`;
  mkdirSync(dir);
  writeFileSync(`${dir}/memory.limit_in_bytes`, String(limitBytes));
  return dir;
}

function cgroupStat(dir: string): Record<string, number> {
  const stat: Record<string, number> = {};
  for (const line of readFileSync(`${dir}/memory.stat`, 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k) stat[k] = Number(v);
  }
  return stat;
}

/** The group can only go once no process is left in it; whatever lingers (an orphaned etcd) is killed. */
function removeCgroup(dir: string): void {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      rmdirSync(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY') throw err;
      for (const pid of readFileSync(`${dir}/cgroup.procs`, 'utf8').split('\n').filter(Boolean)) {
        console.warn(`cgroup ${dir}: process ${pid} outlived the measured command; killing it`);
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
  throw new Error(`cannot remove cgroup ${dir}`);
}

/** "256Mi", "300M", "1Gi", or bytes: a Kubernetes-style memory quantity. */
export function parseMemoryQuantity(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(text.trim());
  if (!m) throw new Error(`not a memory quantity: ${text} (e.g. 256Mi)`);
  const unit = { Ki: 1024, Mi: 1048576, Gi: 1073741824, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Math.round(Number(m[1]) * unit);
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
