// A memory cgroup (v1) with a limit, as Kubernetes gives a container with `resources.limits.memory`: the
// benchmarks run a program in one to see it keep within the limit (no swap here: anonymous memory is what a
// limit cannot reclaim).
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CgroupReport {
  limitMb: number;
  /** memory.max_usage_in_bytes: anon plus page cache charged to the group (files written and read too). */
  maxUsageMb: number;
  /** Peak of memory.stat `rss` (anonymous memory of the group), as sampled by `sample`. */
  peakAnonMb: number;
  /** Times the limit was hit (the kernel then reclaimed), and processes the OOM killer ended. */
  failcnt: number;
  oomKills: number;
}

export interface MemoryCgroup {
  readonly dir: string;
  /** The command line that runs `command` in the group from its first instruction (a shell joins, then execs). */
  wrap(command: string, args: string[]): [string, string[]];
  /** Reads the group's anonymous memory now, for the peak in `report`. */
  sample(): number;
  report(): CgroupReport;
  /** Once the program has exited; whatever lingers in the group (an orphaned etcd) is killed first. */
  remove(): void;
}

/**
 * Makes a group with `limitBytes` under `parent`, by default under this process's own memory cgroup (the one
 * this machine gives us, where we may make groups).
 */
export function createMemoryCgroup(limitBytes: number, parent?: string): MemoryCgroup {
  const own = /^\d+:memory:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1] ?? '/';
  const dir = join(parent ?? join('/sys/fs/cgroup/memory', own), `bench-${process.pid}-${Date.now()}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  const read = (name: string) => readFileSync(join(dir, name), 'utf8');
  let peakAnon = 0;
  return {
    dir,
    wrap: (command, args) => ['/bin/sh', ['-c', `echo $$ > "${dir}/cgroup.procs" && exec "$0" "$@"`, command, ...args]],
    sample() {
      const anon = Number(/^rss (\d+)$/m.exec(read('memory.stat'))?.[1] ?? 0);
      peakAnon = Math.max(peakAnon, anon);
      return anon;
    },
    report: () => ({
      limitMb: limitBytes / 1048576,
      maxUsageMb: Number(read('memory.max_usage_in_bytes')) / 1048576,
      peakAnonMb: peakAnon / 1048576,
      failcnt: Number(read('memory.failcnt')),
      oomKills: Number(/oom_kill (\d+)/.exec(read('memory.oom_control'))?.[1] ?? 0),
    }),
    remove: () => removeGroup(dir),
  };
}

/** The group can only go once no process is left in it. */
function removeGroup(dir: string): void {
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      rmdirSync(dir);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EBUSY') throw err;
      for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
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
