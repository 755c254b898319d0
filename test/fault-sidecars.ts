import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { metric, type SidecarProcess, startSidecar } from './sidecar-helpers.ts';

/** Sidecars still running when the process exits (a run stopped midway, Ctrl-C in scripts/fault-run). */
const alive = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of alive) child.kill('SIGKILL');
});

export type SidecarOptions = Parameters<typeof startSidecar>[0];

/** Starts a sidecar that is killed with this process if the run does not stop it. */
export async function startTrackedSidecar(options: SidecarOptions): Promise<SidecarProcess> {
  const s = await startSidecar(options);
  alive.add(s.child);
  s.child.once('exit', () => alive.delete(s.child));
  return s;
}

/** SIGTERM, and SIGKILL when the sidecar has not exited within `graceMs` (a store down holds its last upload). */
export async function stopSidecar(s: SidecarProcess, graceMs = 30_000): Promise<number | null> {
  const timer = setTimeout(() => s.child.kill('SIGKILL'), graceMs);
  try {
    return await s.stop();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The run's sidecars, one beside each member, each started again on its own dir (and so its own spool) after a
 * kill, a stop or a restore.
 */
export class FaultSidecars {
  readonly running: Array<SidecarProcess | undefined> = [];
  readonly options: SidecarOptions[];
  /** Resolves when a sidecar may start (FaultStore.readyForStart). */
  private readonly ready: () => Promise<void>;

  constructor(options: SidecarOptions[], ready: () => Promise<void>) {
    this.options = options;
    this.ready = ready;
  }

  async start(i: number) {
    await this.ready();
    this.running[i] = await startTrackedSidecar(this.options[i]);
  }

  async startAll() {
    for (let i = 0; i < this.options.length; i++) if (!this.running[i]) await this.start(i);
  }

  async kill(i: number) {
    await this.running[i]?.kill();
    this.running[i] = undefined;
  }

  async stop(i: number) {
    const s = this.running[i];
    this.running[i] = undefined;
    if (s) await stopSidecar(s);
  }

  killAll = () => Promise.all(this.options.map((_, i) => this.kill(i)));
  stopAll = () => Promise.all(this.options.map((_, i) => this.stop(i)));

  /** The sidecar that leads now, by its metrics; undefined in a hand-over. */
  async leading(): Promise<SidecarProcess | undefined> {
    for (const s of this.running) {
      if (s && (await metric(s.url, 'etcd_snapshot_leader').catch(() => undefined)) === 1) return s;
    }
    return undefined;
  }

  /** Waits up to `timeoutMs` for a leading sidecar. */
  async waitLeading(timeoutMs = 30_000): Promise<SidecarProcess | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.leading();
      if (s || Date.now() > deadline) return s;
      await sleep(200);
    }
  }

  logFiles(): string[] {
    return this.options.map((o) => join(o.dir, 'sidecar.log'));
  }
}
