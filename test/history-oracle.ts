import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  createEtcdClient,
  type DeltaEvent,
  type Etcd3,
  type FingerprintedKey,
  FingerprintHash,
  KEY_DIGEST_BYTES,
  type KeyspaceFingerprint,
  keyspacePages,
  type WatchBatch,
  WatchCompactedError,
  watchRevisions,
  writeKeyDigest,
} from '@etcd-steward/core';

/**
 * The fault run's oracle (docs/proof.md §5): the cluster's history as the run saw it happen, recorded from a watch
 * of its own from revision 1 (every key's value, create and mod revision, version and lease, and every delete), in
 * one timeline per restore. A restore to revision R starts a new timeline that shares revisions ≤ R with the one it
 * leaves; the one it leaves is kept, so that what the store set aside can be matched with it. The store is checked
 * against it (store-checks.ts): never against what the sidecar or a program says.
 */

/** A revision's events as one digest: the oracle's own, independent of the code under test, over every field. */
export function eventsDigest(events: readonly DeltaEvent[]): Buffer {
  const hash = createHash('sha256');
  for (const e of events) {
    hash.update(`${e.type} ${e.key.length}:`).update(e.key).update(` ${e.value.length}:`).update(e.value);
    hash.update(` ${e.createRevision} ${e.modRevision} ${e.version} ${e.lease}\n`);
  }
  return hash.digest();
}

/** One key as it was from a revision on: its fingerprint digest (undefined once deleted) and its lease. */
interface Version {
  revision: number;
  digest?: Buffer;
  lease: string;
}

/** A key's state at a revision, as the deep check compares it. */
export interface KeyState {
  digest: string;
  lease: string;
}

export interface LiveKey extends FingerprintedKey {
  lease: string;
}

const UNKNOWN = Buffer.alloc(32);

function keyDigest(kv: FingerprintedKey): Buffer {
  // from Node's shared pool: a run records millions of these, a buffer of its own each would cost ~100 bytes more
  const out = Buffer.allocUnsafe(KEY_DIGEST_BYTES);
  writeKeyDigest(kv, out, 0);
  return out;
}

/** One history of the cluster: revisions 1..head, each with the digest of its events and the keys it wrote. */
export class Timeline {
  /** Every revision up to this one is recorded (or known to be unknown). */
  head = 1;
  /** Revision r's digest at (r - 1) * 32; zeros where the oracle does not know it. */
  private digests = Buffer.alloc(32 * 4096);
  private readonly keys = new Map<string, Version[]>();
  private sorted: string[] | undefined;
  /** Revisions whose keyspace the oracle does not know (it missed revisions before them), as [from, to] ranges. */
  readonly unknownStates: Array<[number, number]> = [];
  /** Below this revision, keys keep only their newest version (prune): their states are not known. */
  private floor = 0;

  readonly id: number;
  readonly parent?: Timeline;
  /** Shares the revisions up to this one with `parent`. */
  readonly branch: number;

  constructor(id: number, parent?: Timeline, branch = 0) {
    this.id = id;
    this.parent = parent;
    this.branch = branch;
    eventsDigest([]).copy(this.digests, 0);
  }

  describe(): string {
    return this.parent
      ? `timeline ${this.id} (restored from timeline ${this.parent.id} at revision ${this.branch})`
      : `timeline ${this.id} (the cluster as it started)`;
  }

  /** The digest of revision r's events, or undefined where the oracle does not know it (or r is past the head). */
  digest(r: number): Buffer | undefined {
    if (r < 1 || r > this.head || r * 32 > this.digests.length) return undefined;
    const d = this.digests.subarray((r - 1) * 32, r * 32);
    return d.equals(UNKNOWN) ? undefined : d;
  }

  /** Whether the keyspace at r is known. */
  knows(r: number): boolean {
    return r >= 1 && r <= this.head && r >= this.floor && !this.unknownStates.some(([a, b]) => r >= a && r <= b);
  }

  private setDigest(r: number, digest: Buffer) {
    while (this.digests.length < r * 32) {
      const bigger = Buffer.alloc(this.digests.length * 2);
      this.digests.copy(bigger);
      this.digests = bigger;
    }
    digest.copy(this.digests, (r - 1) * 32);
  }

  private push(key: string, v: Version) {
    let versions = this.keys.get(key);
    if (!versions) {
      versions = [];
      this.keys.set(key, versions);
      this.sorted = undefined;
    }
    if (versions.at(-1)?.revision === v.revision) versions[versions.length - 1] = v;
    else versions.push(v);
  }

  /** Revision r's events (a whole revision, in etcd's order). */
  record(r: number, events: readonly DeltaEvent[]) {
    if (r <= this.head) return;
    // A watch delivers every revision; one it skipped is not known (it should not happen: said, not guessed).
    if (r > this.head + 1) this.unknownStates.push([this.head + 1, r - 1]);
    this.setDigest(r, eventsDigest(events));
    for (const e of events) {
      const key = e.key.toString('latin1');
      this.push(key, { revision: r, lease: e.lease, digest: e.type === 'put' ? keyDigest(e) : undefined });
    }
    this.head = r;
  }

  /**
   * The keyspace at `revision` as the cluster has it (`live`), where the oracle missed revisions before it (etcd
   * compacted them first) or found the cluster to hold something else: from here on the oracle follows what the
   * cluster holds, and the revisions in between are marked unknown (with `history: false` their events too).
   */
  resync(revision: number, live: readonly LiveKey[], unknownFrom: number, options: { history?: boolean } = {}) {
    // The revisions before it are not this timeline's as recorded either (the restore gave something else).
    if (options.history === false)
      this.digests.fill(0, (unknownFrom - 1) * 32, Math.min(revision * 32, this.digests.length));
    const present = new Set<string>();
    for (const kv of live) {
      const key = kv.key.toString('latin1');
      present.add(key);
      const digest = keyDigest(kv);
      const now = this.versionAt(key, revision);
      if (!now?.digest?.equals(digest) || now.lease !== kv.lease) this.push(key, { revision, digest, lease: kv.lease });
    }
    for (const key of this.keys.keys()) {
      if (!present.has(key) && this.versionAt(key, revision)?.digest) this.push(key, { revision, lease: '0' });
    }
    if (unknownFrom <= revision - 1) this.unknownStates.push([unknownFrom, revision - 1]);
    this.head = Math.max(this.head, revision);
  }

  private versionAt(key: string, r: number): Version | undefined {
    const versions = this.keys.get(key);
    if (!versions) return undefined;
    let lo = 0;
    let hi = versions.length - 1;
    let found: Version | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (versions[mid].revision <= r) {
        found = versions[mid];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  private sortedKeys(): string[] {
    // latin1 strings compare by their bytes, as etcd orders keys
    this.sorted ??= [...this.keys.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return this.sorted;
  }

  /** The keyspace's fingerprint at r, as keyspaceFingerprint and etcd-restore compute it; undefined if not known. */
  fingerprint(r: number): KeyspaceFingerprint | undefined {
    if (!this.knows(r)) return undefined;
    const hash = new FingerprintHash();
    for (const key of this.sortedKeys()) {
      const digest = this.versionAt(key, r)?.digest;
      if (digest) hash.addDigests(digest);
    }
    return hash.digest(r);
  }

  /** Every live key at r with its digest and lease; undefined if not known. */
  state(r: number): Map<string, KeyState> | undefined {
    if (!this.knows(r)) return undefined;
    const state = new Map<string, KeyState>();
    for (const key of this.sortedKeys()) {
      const v = this.versionAt(key, r);
      if (v?.digest) state.set(key, { digest: v.digest.toString('hex'), lease: v.lease });
    }
    return state;
  }

  /** A new timeline sharing revisions ≤ r with this one. */
  branchAt(r: number, id: number): Timeline {
    const child = new Timeline(id, this, r);
    const at = Math.min(r, this.head);
    child.digests = Buffer.alloc(Math.max(this.digests.length, 32 * 4096));
    this.digests.copy(child.digests, 0, 0, Math.min(at * 32, this.digests.length));
    for (const [key, versions] of this.keys) {
      const kept = versions.filter((v) => v.revision <= r);
      if (kept.length > 0) child.keys.set(key, kept);
    }
    for (const [a, b] of this.unknownStates) if (a <= r) child.unknownStates.push([a, Math.min(b, r)]);
    child.floor = this.floor;
    child.head = at;
    return child;
  }

  /** Keeps each key's newest version at or below `floor` and all after: states below it are no longer asked. */
  prune(floor: number) {
    if (floor <= this.floor) return;
    for (const [key, versions] of this.keys) {
      let first = 0;
      while (first + 1 < versions.length && versions[first + 1].revision <= floor) first++;
      if (first > 0) this.keys.set(key, versions.slice(first));
    }
    this.floor = floor;
  }
}

/** The keyspace at `revision` with every field the oracle keeps, read in pages. */
export async function readKeyspace(endpoints: string[], revision?: number): Promise<LiveKey[]> {
  const client = createEtcdClient({ endpoints });
  try {
    return await keyspaceOf(client, revision);
  } finally {
    client.close();
  }
}

/** readKeyspace through a client of the caller's (one to an etcd started on restored data, say). */
export async function keyspaceOf(client: Etcd3, revision?: number): Promise<LiveKey[]> {
  const keys: LiveKey[] = [];
  for await (const page of keyspacePages(client, revision)) {
    for (const kv of page.kvs) {
      keys.push({
        key: kv.key,
        value: kv.value,
        createRevision: kv.create_revision,
        modRevision: kv.mod_revision,
        version: kv.version,
        lease: String(kv.lease ?? '0'),
      });
    }
  }
  return keys;
}

/** The digest and lease of each key, as Timeline.state gives them, for keys read from an etcd. */
export function statesOf(keys: readonly LiveKey[]): Map<string, KeyState> {
  return new Map(
    keys.map((kv) => [kv.key.toString('latin1'), { digest: keyDigest(kv).toString('hex'), lease: kv.lease }]),
  );
}

/**
 * The oracle: its watch on the cluster and every timeline. The run stops the watch before it stops the cluster
 * (after reach() has seen the head), and starts it again on the restored cluster after branch().
 */
export class HistoryOracle {
  readonly timelines: Timeline[] = [new Timeline(0)];
  private watching?: { control: AbortController; done: Promise<void> };
  private readonly endpoints: string[];
  private readonly log: (line: string) => void;

  constructor(endpoints: string[], log: (line: string) => void) {
    this.endpoints = endpoints;
    this.log = log;
  }

  get current(): Timeline {
    return this.timelines[this.timelines.length - 1];
  }

  start() {
    if (this.watching) return;
    const control = new AbortController();
    this.watching = { control, done: this.watch(control.signal) };
  }

  async stop() {
    const w = this.watching;
    this.watching = undefined;
    if (!w) return;
    w.control.abort();
    await w.done;
  }

  /** Waits until the watch has recorded revision `revision`; false when it did not within `timeoutMs`. */
  async reach(revision: number, timeoutMs = 60_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.current.head < revision) {
      if (Date.now() > deadline) return false;
      await sleep(20);
    }
    return true;
  }

  /**
   * The cluster was restored to revision r: a new timeline from r on (the current one goes on when r is its head:
   * nothing was abandoned). Call with the watch stopped.
   */
  branch(r: number): Timeline {
    const now = this.current;
    if (r === now.head) return now;
    if (r > now.head) {
      // The store held revisions the cluster never had: the restore's check says so; the oracle follows the cluster.
      now.unknownStates.push([now.head + 1, r]);
      now.head = r;
      return now;
    }
    const child = now.branchAt(r, this.timelines.length);
    this.timelines.push(child);
    return child;
  }

  private async watch(signal: AbortSignal) {
    let member = 0;
    while (!signal.aborted) {
      const from = this.current.head + 1;
      const endpoint = this.endpoints[member % this.endpoints.length];
      try {
        for await (const batch of watchRevisions({ endpoints: [endpoint] }, from, { signal })) this.take(batch);
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof WatchCompactedError) {
          await this.missed(endpoint, err.compactRevision).catch(() => undefined);
          continue;
        }
        member++; // etcd down, restarting, or a learner: the next member
        await sleep(200, undefined, { signal }).catch(() => undefined);
      }
    }
  }

  private take(batch: WatchBatch) {
    const t = this.current;
    let group: DeltaEvent[] = [];
    for (const e of batch.events) {
      if (group.length > 0 && group[0].modRevision !== e.modRevision) {
        t.record(group[0].modRevision, group);
        group = [];
      }
      group.push(e);
    }
    if (group.length > 0) t.record(group[0].modRevision, group);
  }

  /** etcd compacted revisions before the watch saw them: the oracle reads the keyspace at the compaction instead. */
  private async missed(endpoint: string, compactRevision: number) {
    const t = this.current;
    const from = t.head + 1;
    const live = await readKeyspace([endpoint], compactRevision);
    t.resync(compactRevision, live, from);
    this.log(
      `  oracle: revisions ${from}..${compactRevision} were compacted before its watch saw them; their events are not checked`,
    );
  }
}
