import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { OperationError, UsageError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { pidScope, processEnded } from '../common/pid-scope.js';
import { ObjectNotFoundError, type SnapStore } from '../store/snapstore.js';

/**
 * The lock that the programs which delete or replace snapshots (etcd-gc, the sidecar's garbage collector,
 * compaction) take, so that one of them at a time works on a store.
 */
export const MAINTENANCE_LOCK = 'maintenance';

export interface StoreLockOptions {
  /** How long a holder that stops renewing keeps the lock (renewed every third of it while `fn` runs). */
  ttlMs: number;
  /**
   * How long a taker waits between writing the lock and reading it back; a taker whose own read and write took
   * longer than half of it undoes its write and tries again, so two takers cannot both see their own lock
   * (docs/gc.md §5).
   */
  settleMs?: number;
  /** What the holder is doing, shown to whoever finds the lock taken. */
  purpose: string;
  signal?: AbortSignal;
  /** Told when a lock whose holder ended is taken over before it expired. */
  logger?: Logger;
}

export const DEFAULT_LOCK_SETTLE_MS = 5_000;

/** Another process holds the lock. */
export class StoreLockedError extends OperationError {}

interface LockRecord {
  token: string;
  holder: string;
  purpose: string;
  expiresAt: string;
  /** The holder's pid and where it means that process (pid-scope.ts): a taker there can tell it has ended. */
  pid?: number;
  scope?: string;
}

/**
 * Runs `fn` while holding the store lock `name`: an object `locks/<name>.json` in the store with an expiry.
 * A holder that dies stops renewing and the lock expires after `ttlMs`, or sooner for a taker that can see it
 * has ended (the same host and pid namespace, its pid gone); two takers at once both write, wait,
 * and read back, and only the one whose write is there (the last) goes on. Clocks of the takers are compared
 * through the expiry, so they must agree to well within `ttlMs`. `fn`'s signal aborts if the lock is lost.
 */
export async function withStoreLock<T>(
  store: SnapStore,
  name: string,
  fn: (signal: AbortSignal) => Promise<T>,
  options: StoreLockOptions,
): Promise<T> {
  if (!/^[a-z][a-z0-9-]{0,62}$/.test(name)) throw new UsageError(`lock name "${name}": use lower-case letters and "-"`);
  const lock = new StoreLock(store, `locks/${name}.json`, options);
  await lock.take();
  const controller = new AbortController();
  const stop = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', stop, { once: true });
  let renewal = Promise.resolve();
  const timer = setInterval(() => {
    renewal = renewal.then(() =>
      lock.renew().catch((err: unknown) => {
        controller.abort(err);
      }),
    );
  }, options.ttlMs / 3);
  try {
    return await fn(controller.signal);
  } finally {
    clearInterval(timer);
    options.signal?.removeEventListener('abort', stop);
    await renewal;
    await lock.release();
  }
}

class StoreLock {
  private readonly token = randomBytes(16).toString('hex');
  private readonly holder = `${hostname()}:${process.pid}`;
  private readonly scope = pidScope();
  private readonly settleMs: number;

  constructor(
    private readonly store: SnapStore,
    private readonly object: string,
    private readonly options: StoreLockOptions,
  ) {
    this.settleMs = options.settleMs ?? DEFAULT_LOCK_SETTLE_MS;
  }

  /** Takes the lock; a try whose read and write were too slow to be sure is undone and made again, twice. */
  async take(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (await this.tryTake()) return;
      if (attempt === 3) {
        throw new StoreLockedError(
          `${this.store.location}: taking the lock ${this.object} took longer than ${this.settleMs / 2} ms three times, too long to be sure no other process took it at the same time; nothing was done: try again, or give the lock a longer settle time`,
        );
      }
    }
  }

  /** false when the read and the write took too long (the lock is then removed again). */
  private async tryTake(): Promise<boolean> {
    const started = Date.now();
    const current = await this.read();
    if (current && current.token !== this.token && Date.parse(current.expiresAt) > Date.now()) {
      if (!processEnded(current.scope, current.pid)) throw this.taken(current);
      this.options.logger?.warn('taking over the store lock: its holder, a process on this host, has ended', {
        lock: this.object,
        holder: current.holder,
        purpose: current.purpose,
        expiresAt: current.expiresAt,
      });
    }
    await this.write();
    if (Date.now() - started > this.settleMs / 2) {
      await this.release();
      return false;
    }
    await sleep(this.settleMs, undefined, { signal: this.options.signal });
    const after = await this.read();
    if (after?.token !== this.token) {
      throw after
        ? this.taken(after)
        : new StoreLockedError(`${this.store.location}: the lock ${this.object} was removed as it was taken`);
    }
    return true;
  }

  /** Pushes the expiry on, unless the lock is no longer ours (it expired while this process stalled). */
  async renew(): Promise<void> {
    const current = await this.read();
    if (current?.token !== this.token) {
      throw new StoreLockedError(
        `${this.store.location}: lost the lock ${this.object}${current ? ` to ${current.holder} (${current.purpose})` : ''}: stopped`,
      );
    }
    await this.write();
  }

  async release(): Promise<void> {
    const current = await this.read().catch(() => undefined);
    if (current?.token === this.token) await this.store.delete(this.object);
  }

  private async write(): Promise<void> {
    const record: LockRecord = {
      token: this.token,
      holder: this.holder,
      purpose: this.options.purpose,
      expiresAt: new Date(Date.now() + this.options.ttlMs).toISOString(),
      pid: process.pid,
      ...(this.scope !== undefined ? { scope: this.scope } : {}),
    };
    await this.store.put(this.object, Readable.from([Buffer.from(JSON.stringify(record))]));
  }

  /** The lock as stored, checked: the store's content is not trusted. */
  private async read(): Promise<LockRecord | undefined> {
    let text = '';
    try {
      for await (const chunk of await this.store.get(this.object)) {
        text += chunk.toString('utf8');
        if (text.length > 4096) break;
      }
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return undefined;
      throw err;
    }
    const record = parseRecord(text);
    if (!record) {
      throw new OperationError(
        `${this.store.location}: ${this.object} is not a lock this program wrote; if no gc or compaction runs, delete it`,
      );
    }
    return record;
  }

  private taken(current: LockRecord): StoreLockedError {
    return new StoreLockedError(
      `${this.store.location} is locked by ${current.holder} (${current.purpose}) until ${current.expiresAt}: another gc or compaction runs; try again later (a holder that died lets the lock expire, or on this host is found gone at once)`,
    );
  }
}

function parseRecord(text: string): LockRecord | undefined {
  try {
    const r = JSON.parse(text) as Partial<LockRecord>;
    const fields = [r.token, r.holder, r.purpose, r.expiresAt];
    if (
      fields.every((f) => typeof f === 'string' && f.length <= 256) &&
      !Number.isNaN(Date.parse(r.expiresAt!)) &&
      (r.pid === undefined || Number.isSafeInteger(r.pid)) &&
      (r.scope === undefined || (typeof r.scope === 'string' && r.scope.length <= 256))
    ) {
      return r as LockRecord;
    }
  } catch {}
  return undefined;
}
