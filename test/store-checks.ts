import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type CatalogEntry,
  createEtcdClient,
  type DeltaEvent,
  fetchDelta,
  freePort,
  type KeyspaceFingerprint,
  keyspaceFingerprint,
  listSnapshots,
  openStore,
  parseSnapshotName,
  readDeltaEvents,
  type SnapStore,
} from '@etcd-steward/core';
import { readRestored } from '@etcd-steward/testing';
import type { FaultStore } from './fault-store.ts';
import {
  eventsDigest,
  type HistoryOracle,
  type KeyState,
  keyspaceOf,
  readKeyspace,
  statesOf,
  type Timeline,
} from './history-oracle.ts';
import { runProgram } from './run-program.ts';

/**
 * The oracle's checks of the store (docs/proof.md §5), each against the history the oracle recorded, never against
 * what the sidecar or a program says of itself:
 * - `v2-history`: every delta in `v2/` holds the current timeline's events at each of its revisions, every full
 *   snapshot restores (etcd-restore --snapshot) to the current timeline's keyspace at its revision;
 * - `v2-coverage`: from the oldest full snapshot on, every revision up to the store's newest is in some delta
 *   (but revisions etcd compacted before a sidecar could watch them, where its log says so, up to the full snapshot
 *   it took then);
 * - `newest`: etcd-restore of the newest state gives the current timeline's keyspace there, which is the live
 *   cluster's (at the end also each key's lease, read from an etcd started on the result);
 * - `to-revision`: etcd-restore --to-revision r, for revisions r of the current timeline the store covers;
 * - `forks-history`: every object under `forks/` holds some recorded timeline's history (deltas by their events,
 *   full snapshots restored), and `forks-missing`: what a restore abandoned is there.
 * Each finding is one Finding; the run adds the seed and the step.
 */
export interface Finding {
  check: string;
  /** What the finding is about (an object, a revision): the run reports a subject once. */
  subject: string;
  message: string;
}

interface Restored {
  code: number;
  error?: string;
  revision?: number;
  snapshot?: string;
  fingerprint?: KeyspaceFingerprint;
  dataDir: string;
  peerPort: number;
}

/** A revision range [from, to]. */
type Range = [number, number];

/** The abandoned snapshots a restore left, which must turn up under forks/. */
interface SetAsideExpectation {
  revision: number;
  objects: Array<{ base: string; size: number }>;
  /** etcd-gc or etcd-compact ran meanwhile: what they deleted from v2/ is not owed. */
  programsRan: boolean;
  step: number;
}

export interface CheckerOptions {
  store: FaultStore;
  oracle: HistoryOracle;
  scratch: string;
  endpoints: () => string[];
  sidecarLogs: () => string[];
  log: (line: string) => void;
}

export class StoreChecker {
  private store?: SnapStore;
  private readonly deltas = new Map<string, Map<number, Buffer>>();
  private readonly fulls = new Map<string, Restored>();
  private readonly forks = new Set<string>();
  private readonly expectations: SetAsideExpectation[] = [];
  private restores = 0;

  private readonly options: CheckerOptions;

  constructor(options: CheckerOptions) {
    this.options = options;
  }

  private async open(): Promise<SnapStore> {
    this.store ??= await openStore(this.options.store.directUrl, { env: this.options.store.env });
    return this.store;
  }

  async close() {
    await this.store?.close?.();
    this.store = undefined;
  }

  /** The store's snapshots in v2/, oldest first. */
  async listing(): Promise<CatalogEntry[]> {
    return (await listSnapshots(await this.open())).filter((e) => e.name.startsWith('v2/'));
  }

  /** Every object under forks/. */
  async forksListing() {
    return (await this.open()).list('forks/');
  }

  /** etcd-gc or etcd-compact ran: what they deleted from v2/ is not owed under forks/ by the restores before. */
  programsRan() {
    for (const x of this.expectations) x.programsRan = true;
  }

  /** A restore to `revision` abandoned `entries` (those past it must be set aside, as they are). */
  expectSetAside(revision: number, entries: readonly CatalogEntry[], programsRan: boolean, step: number) {
    const objects = entries
      .filter((e) => e.lastRevision > revision)
      .map((e) => ({ base: e.name.split('/').pop() ?? e.name, size: e.size }));
    if (objects.length > 0) this.expectations.push({ revision, objects, programsRan, step });
  }

  /** etcd-restore into a scratch data dir; its JSON result (the fingerprint it read from the restored db). */
  async restore(storeUrl: string, extra: string[]): Promise<Restored> {
    const dataDir = join(this.options.scratch, `check-restore-${this.restores++}`);
    const peerPort = await freePort();
    const res = await runProgram(
      'etcd-restore',
      [
        ...['--store', storeUrl, '--data-dir', dataDir, '--name', 'r0'],
        ...['--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`, '--initial-cluster-token', 'check'],
        ...['--output', 'json', ...extra],
      ],
      this.options.store.env,
    );
    if (res.code !== 0) {
      await rm(dataDir, { recursive: true, force: true });
      const error = res.stderr.trim().split('\n').at(-1)?.slice(0, 400) ?? '';
      return { code: res.code, error, dataDir, peerPort };
    }
    const out = JSON.parse(res.stdout) as { revision: number; snapshot: string; fingerprint?: KeyspaceFingerprint };
    return { code: 0, revision: out.revision, snapshot: out.snapshot, fingerprint: out.fingerprint, dataDir, peerPort };
  }

  /**
   * Every check; `picks` random revisions restored (drawn with `random`); `deep`: the newest restore is also read
   * by an etcd started on it, each key's lease compared. `head`: the cluster's head, which the store reached when
   * `settled`.
   */
  async check(options: {
    random: () => number;
    picks: number;
    deep: boolean;
    head: number;
    settled: boolean;
  }): Promise<Finding[]> {
    const findings: Finding[] = [];
    const cur = this.options.oracle.current;
    const entries = await this.listing();
    const store = await this.open();
    findings.push(...(await this.checkDeltas(store, entries, cur)));
    for (const e of entries) {
      if (e.kind === 'Full') findings.push(...(await this.checkFull(e, cur)));
    }
    findings.push(...(await this.coverage(entries)));
    findings.push(...(await this.newest(cur, options)));
    const picks = this.pick(entries, cur, options.random, options.picks);
    for (const r of picks) {
      const restored = await this.restore(this.options.store.directUrl, ['--to-revision', String(r)]);
      await rm(restored.dataDir, { recursive: true, force: true });
      const expected = cur.fingerprint(r);
      if (restored.code !== 0) {
        findings.push({
          check: 'to-revision',
          subject: sameKind(`${restored.code} ${restored.error}`),
          message: `etcd-restore --to-revision ${r} exited ${restored.code}: ${restored.error}`,
        });
      } else if (expected && !sameKeyspace(restored.fingerprint, expected)) {
        findings.push({
          check: 'to-revision',
          subject: restored.snapshot ?? `revision ${r}`,
          message: `etcd-restore --to-revision ${r} (from ${restored.snapshot}) gives ${describe(restored.fingerprint)}, the cluster had ${describe(expected)} there (${cur.describe()})`,
        });
      }
    }
    const forks = await this.checkForks(store);
    findings.push(...forks.findings);
    const fulls = entries.filter((e) => e.kind === 'Full');
    this.options.log(
      `  checked ${entries.length - fulls.length} deltas and ${fulls.length} full snapshots in v2/ (full snapshots at ${fulls.map((e) => e.lastRevision).join(' ')}), ${forks.checked} new object(s) under forks/, restored the newest and --to-revision ${picks.join(' ') || '(none covered)'} against ${cur.describe()}, head ${cur.head}`,
    );
    const floor = Math.min(...entries.filter((e) => e.kind === 'Full').map((e) => e.lastRevision));
    if (Number.isFinite(floor)) cur.prune(floor);
    return findings;
  }

  /** The digest of each revision of a delta, read with the core library's delta reader (cached: names are unique). */
  private async deltaDigests(store: SnapStore, e: CatalogEntry): Promise<Map<number, Buffer> | Error> {
    const id = `${e.name}|${e.size}`;
    const known = this.deltas.get(id);
    if (known) return known;
    const file = join(this.options.scratch, 'delta-check');
    try {
      await fetchDelta(store, e, file);
      const digests = new Map<number, Buffer>();
      let group: DeltaEvent[] = [];
      const close = () => {
        if (group.length > 0) digests.set(group[0].modRevision, eventsDigest(group));
        group = [];
      };
      for await (const ev of readDeltaEvents(file, e, e.name, { verified: true })) {
        if (group.length > 0 && group[0].modRevision !== ev.modRevision) close();
        group.push(ev);
      }
      close();
      this.deltas.set(id, digests);
      return digests;
    } catch (err) {
      return err as Error;
    } finally {
      await rm(file, { force: true });
    }
  }

  /** The timelines a delta's every revision agrees with (where the oracle knows them). */
  private agreeing(digests: Map<number, Buffer>): Timeline[] {
    return this.options.oracle.timelines.filter((t) => {
      let compared = 0;
      for (const [r, d] of digests) {
        if (r > t.head) return false;
        const known = t.digest(r);
        if (!known) continue;
        if (!known.equals(d)) return false;
        compared++;
      }
      return compared > 0;
    });
  }

  /**
   * Each delta's revisions against the current timeline. Deltas that differ alike (their revisions another
   * timeline's, one after another, as a spool uploaded after a restore leaves them) make one finding.
   */
  private async checkDeltas(store: SnapStore, entries: CatalogEntry[], cur: Timeline): Promise<Finding[]> {
    const findings: Finding[] = [];
    let run:
      | {
          first: CatalogEntry;
          last: CatalogEntry;
          whose: string;
          revisions: number;
          differing: number;
          firstRevision: number;
        }
      | undefined;
    const flush = () => {
      if (!run) return;
      const { first, last } = run;
      const objects = first === last ? first.name : `${first.name} to ${last.name.split('/').pop()}`;
      findings.push({
        check: 'v2-history',
        subject: `${first.name} ${run.whose}`,
        message: `${objects}: ${run.differing} of their ${run.revisions} revisions (the first ${run.firstRevision}) are not the cluster's history (${cur.describe()}, head ${cur.head}); ${run.whose}`,
      });
      run = undefined;
    };
    for (const e of entries.filter((x) => x.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision)) {
      const digests = await this.deltaDigests(store, e);
      if (digests instanceof Error) {
        flush();
        findings.push({ check: 'v2-history', subject: e.name, message: `${e.name} does not read: ${digests.message}` });
        continue;
      }
      const differing: number[] = [];
      for (const [r, d] of digests) {
        const known = cur.digest(r);
        if (r > cur.head || (known && !known.equals(d))) differing.push(r);
      }
      if (differing.length === 0) {
        flush();
        continue;
      }
      const whose = this.whose(this.agreeing(digests));
      if (run && run.whose !== whose) flush();
      run ??= { first: e, last: e, whose, revisions: 0, differing: 0, firstRevision: differing[0] };
      run.last = e;
      run.revisions += digests.size;
      run.differing += differing.length;
    }
    flush();
    return findings;
  }

  private whose(timelines: Timeline[]): string {
    return timelines.length > 0
      ? `they are the history of ${timelines.map((t) => t.describe()).join(', ')}`
      : 'they match no history the cluster had';
  }

  /** A full snapshot restored alone (cached), compared with the timeline's keyspace at its revision. */
  private async checkFull(e: CatalogEntry, cur: Timeline): Promise<Finding[]> {
    let restored = this.fulls.get(`${e.name}|${e.size}`);
    if (!restored) {
      restored = await this.restore(this.options.store.directUrl, [
        ...['--snapshot', e.name, '--to-revision', String(e.lastRevision)],
      ]);
      await rm(restored.dataDir, { recursive: true, force: true });
      this.fulls.set(`${e.name}|${e.size}`, restored);
    }
    if (restored.code !== 0) {
      return [{ check: 'v2-history', subject: e.name, message: `${e.name} does not restore: ${restored.error}` }];
    }
    const expected = cur.fingerprint(e.lastRevision);
    if (e.lastRevision <= cur.head && (!expected || sameKeyspace(restored.fingerprint, expected))) return [];
    const others = this.options.oracle.timelines.filter((t) =>
      sameKeyspace(restored.fingerprint, t.fingerprint(e.lastRevision)),
    );
    return [
      {
        check: 'v2-history',
        subject: e.name,
        message: `${e.name} restores to ${describe(restored.fingerprint)}, not the cluster's keyspace at revision ${e.lastRevision} (${cur.describe()}: ${expected ? describe(expected) : `its head is ${cur.head}`}); ${others.length > 0 ? `it is the keyspace of ${others.map((t) => t.describe()).join(', ')}` : 'it matches no history the cluster had'}`,
      },
    ];
  }

  /** Revisions after the oldest full snapshot that no delta holds, but those a sidecar said etcd compacted first. */
  private async coverage(entries: CatalogEntry[]): Promise<Finding[]> {
    const fulls = entries.filter((e) => e.kind === 'Full').sort((a, b) => a.lastRevision - b.lastRevision);
    if (fulls.length === 0)
      return [{ check: 'v2-coverage', subject: 'no full', message: 'v2/ holds no full snapshot' }];
    const newest = Math.max(...entries.map((e) => e.lastRevision));
    const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision);
    const gaps: Range[] = [];
    let covered = fulls[0].lastRevision;
    for (const d of deltas) {
      if (d.startRevision > covered + 1) gaps.push([covered + 1, d.startRevision - 1]);
      covered = Math.max(covered, d.lastRevision);
    }
    if (covered < newest) gaps.push([covered + 1, newest]);
    const compactions = await this.sidecarCompactions();
    // Each compaction excuses a gap from where the deltas stopped up to the full snapshot taken then; compactions in
    // a row (the sidecar down again before a delta followed that snapshot) leave one gap that they excuse in turn.
    const excused = ([a, b]: Range) => {
      for (let from = a; from <= b; ) {
        const through = Math.max(
          -1,
          ...compactions
            .filter(([needed, compact]) => needed <= from && from <= compact + 1)
            .map(([, compact]) => fulls.find((f) => f.lastRevision >= compact)?.lastRevision ?? -1),
        );
        if (through < from) return false;
        from = through + 1;
      }
      return true;
    };
    return gaps
      .filter((g) => !excused(g))
      .map(([a, b]) => ({
        check: 'v2-coverage',
        subject: `${a}..${b}`,
        message: `no delta in v2/ holds revisions ${a}..${b} (the oldest full snapshot is at ${fulls[0].lastRevision}, the newest snapshot at ${newest}; full snapshots at ${fulls.map((f) => f.lastRevision).join(', ')})`,
      }));
  }

  /**
   * What the sidecars logged of etcd compacting past the revision their next delta needed: [needed, compacted]; and
   * of etcd having compacted what lay between the store's deltas and a spooled full snapshot: [from, that snapshot].
   */
  private async sidecarCompactions(): Promise<Range[]> {
    const said = [
      /past the revision the next delta needs[^\n]*?"neededRevision":(\d+)[^\n]*?"compactRevision":(\d+)/g,
      /between the store and a spooled full snapshot[^\n]*?"fromRevision":(\d+)[^\n]*?"toRevision":(\d+)/g,
    ];
    const found: Range[] = [];
    for (const file of this.options.sidecarLogs()) {
      const text = await readFile(file, 'utf8').catch(() => '');
      for (const pattern of said) for (const m of text.matchAll(pattern)) found.push([Number(m[1]), Number(m[2])]);
    }
    return found;
  }

  /** The newest state restored: the current timeline's keyspace there, and the live cluster's. */
  private async newest(cur: Timeline, options: { deep: boolean; head: number; settled: boolean }): Promise<Finding[]> {
    const restored = await this.restore(this.options.store.directUrl, []);
    try {
      if (restored.code !== 0 || restored.revision === undefined) {
        return [
          {
            check: 'newest',
            subject: sameKind(`${restored.code} ${restored.error}`),
            message: `etcd-restore of the newest state exited ${restored.code}: ${restored.error}`,
          },
        ];
      }
      const r = restored.revision;
      const findings: Finding[] = [];
      const expected = cur.fingerprint(r);
      const behind = options.settled && r < options.head;
      if (behind || r > cur.head || (expected && !sameKeyspace(restored.fingerprint, expected))) {
        findings.push({
          check: 'newest',
          subject: restored.snapshot ?? 'restore',
          message: `the newest state restores revision ${r} (from ${restored.snapshot}): ${describe(restored.fingerprint)}; the cluster ${behind ? `was at ${options.head}, which a delta in v2/ reached` : `had ${expected ? describe(expected) : 'not reached it'}`} (${cur.describe()}, head ${cur.head})`,
        });
      }
      const live = await this.liveFingerprint(r);
      if (live && !sameKeyspace(restored.fingerprint, live)) {
        findings.push({
          check: 'newest',
          subject: `live ${restored.snapshot}`,
          message: `the newest state restores ${describe(restored.fingerprint)}, the live cluster holds ${describe(live)} at that revision`,
        });
      }
      if (options.deep && findings.length === 0) findings.push(...(await this.deep(restored, cur)));
      return findings;
    } finally {
      await rm(restored.dataDir, { recursive: true, force: true });
    }
  }

  private async liveFingerprint(revision: number): Promise<KeyspaceFingerprint | undefined> {
    const client = createEtcdClient({ endpoints: this.options.endpoints() });
    try {
      return await keyspaceFingerprint(client, revision);
    } catch {
      return undefined; // compacted past it: the oracle's comparison stands
    } finally {
      client.close();
    }
  }

  /** Each key of the restored newest state (value, revisions, version, lease) against the oracle's and the cluster's. */
  private async deep(restored: Restored, cur: Timeline): Promise<Finding[]> {
    const r = restored.revision ?? 0;
    const [read] = await readRestored(
      [{ name: 'r0', dataDir: restored.dataDir, peerPort: restored.peerPort }],
      { initialCluster: `r0=http://127.0.0.1:${restored.peerPort}`, clusterToken: 'check' },
      (client) => keyspaceOf(client, r || undefined),
    );
    const findings: Finding[] = [];
    const restoredState = statesOf(read);
    const expected = cur.state(r);
    const difference = expected && firstDifference(restoredState, expected);
    if (difference) {
      findings.push({
        check: 'newest',
        subject: 'deep',
        message: `the newest state restored, read by etcd: ${difference} (restored / the cluster's history at ${r})`,
      });
    }
    const live = await readKeyspace(this.options.endpoints(), r).catch(() => undefined);
    const liveDifference = live && firstDifference(restoredState, statesOf(live));
    if (liveDifference) {
      findings.push({
        check: 'newest',
        subject: 'deep-live',
        message: `the newest state restored, read by etcd: ${liveDifference} (restored / the live cluster at ${r})`,
      });
    }
    return findings;
  }

  /** Revisions of the current timeline that a full snapshot in v2/ and the deltas after it reach, drawn at random. */
  private pick(entries: CatalogEntry[], cur: Timeline, random: () => number, count: number): number[] {
    const deltas = entries.filter((e) => e.kind === 'Incr').sort((a, b) => a.startRevision - b.startRevision);
    const ranges: Range[] = [];
    for (const f of entries.filter((e) => e.kind === 'Full')) {
      let reach = f.lastRevision;
      for (const d of deltas) if (d.startRevision <= reach + 1 && d.lastRevision > reach) reach = d.lastRevision;
      ranges.push([f.lastRevision, Math.min(reach, cur.head)]);
    }
    const candidates = new Set<number>();
    for (let tries = 0; candidates.size < count && tries < count * 20 && ranges.length > 0; tries++) {
      const [a, b] = ranges[Math.floor(random() * ranges.length)];
      if (b < a) continue;
      const r = a + Math.floor(random() * (b - a + 1));
      if (cur.knows(r)) candidates.add(r);
    }
    return [...candidates];
  }

  /** Every object under forks/ (once each) against the recorded timelines, and what restores owed there. */
  private async checkForks(store: SnapStore): Promise<{ findings: Finding[]; checked: number }> {
    const findings: Finding[] = [];
    const objects = await store.list('forks/');
    let checked = 0;
    for (const o of objects) {
      const id = `${o.name}|${o.size}`;
      if (this.forks.has(id)) continue;
      this.forks.add(id);
      checked++;
      const ref = parseSnapshotName(`v2/${o.name.split('/').pop()}`);
      if (!ref) continue;
      // S3 listings carry no metadata: the object's own, for the copy a full snapshot is restored from
      const metadata = Object.keys(o.metadata).length > 0 ? o.metadata : ((await store.stat(o.name))?.metadata ?? {});
      const entry: CatalogEntry = { ...ref, name: o.name, size: o.size, metadata };
      if (ref.kind === 'Incr') {
        const digests = await this.deltaDigests(store, entry);
        if (digests instanceof Error) {
          findings.push({
            check: 'forks-history',
            subject: o.name,
            message: `${o.name} does not read: ${digests.message}`,
          });
        } else if (this.agreeing(digests).length === 0) {
          findings.push({
            check: 'forks-history',
            subject: o.name,
            message: `${o.name}: its events match no history the cluster had`,
          });
        }
      } else {
        findings.push(...(await this.checkForkFull(store, entry)));
      }
    }
    const forked = new Set(objects.map((o) => `${o.name.split('/').pop()}|${o.size}`));
    const inV2 = new Set((await this.listing()).map((e) => `${e.name.split('/').pop()}`));
    for (const x of this.expectations.splice(0)) {
      const missing = x.objects.filter((o) => !forked.has(`${o.base}|${o.size}`) && !inV2.has(o.base));
      if (missing.length === 0) continue;
      const message = `the restore to revision ${x.revision} (step ${x.step}) abandoned ${missing.length} snapshot(s) that are neither under forks/ nor in v2/: ${missing.map((o) => o.base).join(', ')}`;
      if (x.programsRan) this.options.log(`  note: ${message} (etcd-gc or etcd-compact ran meanwhile)`);
      else findings.push({ check: 'forks-missing', subject: `restore at step ${x.step}`, message });
    }
    return { findings, checked };
  }

  /** A full snapshot under forks/ restored alone from a scratch store: some timeline's keyspace at its revision. */
  private async checkForkFull(store: SnapStore, entry: CatalogEntry): Promise<Finding[]> {
    const dir = join(this.options.scratch, `fork-full-${this.restores}`);
    await mkdir(join(dir, 'v2'), { recursive: true });
    const scratch = await openStore(`file://${dir}`);
    try {
      const base = entry.name.split('/').pop() ?? entry.name;
      await scratch.put(`v2/${base}`, await store.get(entry.name, { raw: true }), { metadata: entry.metadata });
      const restored = await this.restore(`file://${dir}`, []);
      await rm(restored.dataDir, { recursive: true, force: true });
      if (restored.code !== 0) {
        return [
          { check: 'forks-history', subject: entry.name, message: `${entry.name} does not restore: ${restored.error}` },
        ];
      }
      const matching = this.options.oracle.timelines.filter((t) =>
        sameKeyspace(restored.fingerprint, t.fingerprint(entry.lastRevision)),
      );
      const unknown = this.options.oracle.timelines.every((t) => !t.knows(entry.lastRevision));
      if (matching.length > 0 || unknown) return [];
      return [
        {
          check: 'forks-history',
          subject: entry.name,
          message: `${entry.name} restores to ${describe(restored.fingerprint)}: no history the cluster had at revision ${entry.lastRevision}`,
        },
      ];
    } finally {
      await scratch.close?.();
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** A failure's kind: its message without numbers (revisions, counts, times), so that one kind is reported once. */
export function sameKind(message: string): string {
  return message.replace(/\d+/g, 'N').slice(0, 200);
}

function sameKeyspace(a: KeyspaceFingerprint | undefined, b: KeyspaceFingerprint | undefined): boolean {
  return a !== undefined && b !== undefined && a.revision === b.revision && a.keys === b.keys && a.sha256 === b.sha256;
}

function describe(f: KeyspaceFingerprint | undefined): string {
  return f ? `${f.keys} keys at revision ${f.revision} (fingerprint ${f.sha256.slice(0, 12)})` : 'no fingerprint';
}

/** The first key whose state differs between two keyspaces, said as `key: a / b`. */
function firstDifference(a: Map<string, KeyState>, b: Map<string, KeyState>): string | undefined {
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  for (const key of keys) {
    const x = a.get(key);
    const y = b.get(key);
    const show = (s: KeyState | undefined) => (s ? `digest ${s.digest.slice(0, 12)} lease ${s.lease}` : 'absent');
    if (x?.digest !== y?.digest || x?.lease !== y?.lease)
      return `key ${JSON.stringify(Buffer.from(key, 'latin1').toString())}: ${show(x)} / ${show(y)}`;
  }
  return undefined;
}
