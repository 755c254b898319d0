import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { readDeltaRevisions } from '../backup/fetch-delta.js';
import type { CatalogEntry } from '../backup/snapshot-catalog.js';
import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { errorMessage, IntegrityError, OperationError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import type { Revision } from '../format/delta-revisions.js';
import type { FullSnapshotFacts } from '../format/full-snapshot-check.js';
import { baseFile as baseFileIn, type ChainSource, UnusableFullSnapshotError } from './chain-source.js';
import type { PreparedBase, ReplayEngine } from './replay-engine.js';

export interface ChainReplayOptions {
  chain: SnapshotChain;
  /**
   * Where the full snapshot's and the deltas' files come from (chain-source.ts): fetched here (storeSource), or
   * by a restore's other process (restore/chain-feed.ts), so that fetching runs beside the replay.
   */
  source: ChainSource;
  /** Stop at this revision (inclusive). */
  toRevision?: number;
  /** Scratch space: the full snapshot, the deltas the source holds ahead, the result. */
  workDir: string;
  engine: ReplayEngine;
  /** On a damaged or missing delta, finish at the last good revision instead of failing. */
  allowPartial?: boolean;
  /**
   * `false`: the engine takes no revision before the full snapshot is in, even where it could (preparedBase); for a
   * replay again after a BaseNotAsPreparedError.
   */
  prepare?: boolean;
  logger?: Logger;
  signal?: AbortSignal;
  /**
   * Leave the result in the db file the engine extended (`dbFile`, no sha256 trailer), where the engine can
   * (`finishInPlace`): for a caller that lays a data dir out around it, which needs no trailer and saves
   * reading the whole db once more to hash it. With other engines the result stays a snapshot file.
   */
  inPlace?: boolean;
}

export interface ChainReplayResult {
  /** The revision the result holds. */
  revision: number;
  /** The result as an etcd snapshot file (db plus sha256 trailer), verified; unless `dbFile` holds it. */
  snapshotFile?: string;
  /** The result as a bare db file, its revision read back, not yet synced: when `inPlace` was asked for and the engine could. */
  dbFile?: string;
  /** The revision the full snapshot held (may be above its name: etcd#9037). */
  baseRevision: number;
  deltas: number;
  revisions: number;
  events: number;
  /** Live keys the deltas added (puts at version 1) and removed, for checking the result's key count. */
  created: number;
  deleted: number;
  /** Set when a delta could not be used and `allowPartial` let the replay end early at `snapshot.revision`. */
  stoppedBy?: { delta: string; reason: string };
}

/**
 * Rebuilds the state a chain describes as a snapshot file, or as a db file (`inPlace`): the full snapshot,
 * then each delta's revisions through a replay engine, up to the target. The source fetches deltas ahead
 * with bounded concurrency, each verified whole before its first event is applied, and each is deleted once
 * applied, so disk holds what the source holds ahead plus one delta, and memory one revision. Revisions must follow each other
 * without a gap; those at or below what is already reached (overlapping deltas, a full snapshot ahead of its
 * name) are skipped.
 */
export async function replayChain(options: ChainReplayOptions): Promise<ChainReplayResult> {
  const { source, chain, engine, workDir } = options;
  const logger = options.logger ?? silentLogger;
  await mkdir(join(workDir, 'deltas'), { recursive: true });
  const baseFile = baseFileIn(workDir);
  const inPlace = options.inPlace === true && engine.finishInPlace !== undefined;
  const wanted = options.toRevision ?? chain.lastRevision;
  const prepared = options.prepare === false ? undefined : await preparedBase(options, baseFile, wanted);
  // Prepared, the engine takes the deltas' revisions while the full snapshot comes in; otherwise it comes first.
  const stopBase = new AbortController(); // a replay that fails first stops the full snapshot's fetch
  const baseSignal = options.signal ? AbortSignal.any([options.signal, stopBase.signal]) : stopBase.signal;
  const baseIn = fetchBase(source, chain.full, baseFile, { ...options, signal: baseSignal });
  let baseFailed = false;
  baseIn.catch(() => (baseFailed = true)); // awaited below
  const base = prepared ? undefined : await baseIn;
  const from = base?.revision ?? prepared!.revision;
  const result: ChainReplayResult = {
    revision: from,
    snapshotFile: baseFile,
    baseRevision: from,
    deltas: 0,
    revisions: 0,
    events: 0,
    created: 0,
    deleted: 0,
  };
  if (chain.deltas.length === 0 || from >= wanted) return result;

  const progress = new ReplayProgress(logger, from, chain.lastRevision);
  let reached = from;
  let finished = false;
  try {
    await (prepared ? engine.prepare!(prepared) : engine.open({ file: baseFile, revision: from }));
    const fetched = source.deltaFiles({ revision: from, dbSize: base?.size ?? prepared!.dbSize }, options.signal);
    for await (const { item: entry, value, error } of fetched) {
      options.signal?.throwIfAborted();
      if (baseFailed) break; // it says why below
      const label = `${source.location}/${entry.name}`;
      const file = value as string;
      if (error !== undefined) {
        if (!(error instanceof IntegrityError || isMissing(error)) || !options.allowPartial) {
          throw new OperationError(`cannot use delta ${label}: ${errorMessage(error)}`, { cause: error });
        }
        result.stoppedBy = { delta: entry.name, reason: errorMessage(error) };
        break;
      }
      if (entry.startRevision > reached + 1) {
        const reason = `revisions ${reached + 1}..${entry.startRevision - 1} are in no delta`;
        if (!options.allowPartial) throw new OperationError(`cannot continue with ${label}: ${reason}`);
        result.stoppedBy = { delta: entry.name, reason };
        break;
      }
      try {
        pieces: for await (const revisions of readDeltaRevisions(file, entry, label, { verified: true })) {
          for (const rev of revisions) {
            if (rev.revision <= reached) continue;
            if (rev.revision > wanted) {
              finished = true;
              break pieces;
            }
            if (rev.revision !== reached + 1) {
              throw new IntegrityError(`${label}: revisions ${reached + 1}..${rev.revision - 1} are missing`);
            }
            const applying = engine.apply(rev);
            if (applying) await applying;
            reached = rev.revision;
            count(result, rev);
          }
          progress.update(reached);
        }
      } catch (err) {
        // Content that contradicts itself (hash-verified, yet out of order): what came before it stands.
        if (!(err instanceof IntegrityError) || !options.allowPartial) {
          throw err instanceof IntegrityError
            ? new OperationError(`cannot use delta ${label}: ${err.message}`, { cause: err })
            : err;
        }
        result.stoppedBy = { delta: entry.name, reason: err.message };
        break;
      }
      await engine.checkpoint(reached);
      await rm(file, { force: true });
      result.deltas++;
      if (finished || reached >= wanted) break;
    }
    if (prepared) await engine.open({ file: baseFile, revision: (await baseIn).revision });
    if (inPlace) {
      result.revision = await engine.finishInPlace!();
      delete result.snapshotFile;
      result.dbFile = baseFile;
    } else {
      result.snapshotFile = join(workDir, 'result.db');
      result.revision = (await engine.finish(result.snapshotFile)).revision;
      await rm(baseFile, { force: true });
    }
    if (result.revision !== reached) {
      throw new OperationError(`the replayed result holds revision ${result.revision}, expected ${reached}`);
    }
    progress.done(reached);
    return result;
  } finally {
    stopBase.abort(new Error('the replay has ended'));
    await baseIn.catch(() => {});
    await engine.close();
  }
}

/**
 * etcd's bbolt pages are the system's memory pages, 4 KiB where etcd runs (Linux on amd64, arm64 with 4 KiB pages);
 * a db with others makes the engine start again without preparing.
 */
const PAGE_SIZE = 4096;

/**
 * Where an engine that can (ReplayEngine.prepare) writes the deltas' rows while the full snapshot comes in: past
 * the end of its db, whose size the full snapshot's metadata records (ours do; ebr's do not, and their revision may
 * be later than their name says), at the revision its name says.
 */
async function preparedBase(
  options: ChainReplayOptions,
  file: string,
  wanted: number,
): Promise<(PreparedBase & { dbSize: number }) | undefined> {
  const { engine, source, chain } = options;
  if (!engine.prepare || !source.earlyBase || chain.deltas.length === 0) return undefined;
  const early = await source.earlyBase(options.signal);
  if (!early.recorded || early.revision >= wanted) return undefined;
  return {
    file,
    revision: early.revision,
    pageSize: PAGE_SIZE,
    firstPgid: Math.ceil(early.dbSize / PAGE_SIZE),
    dbSize: early.dbSize,
  };
}

/** The chain's full snapshot from the source, which must not be past the target revision. */
async function fetchBase(
  source: ChainSource,
  entry: CatalogEntry,
  file: string,
  options: ChainReplayOptions,
): Promise<FullSnapshotFacts> {
  const facts = await source.fullSnapshot(entry, file, options.signal);
  if (options.toRevision !== undefined && facts.revision > options.toRevision) {
    throw new UnusableFullSnapshotError(
      `${source.location}/${entry.name} holds revision ${facts.revision}, past the target revision ${options.toRevision}`,
    );
  }
  return facts;
}

/** An object listed a moment ago and gone now (deleted by garbage collection, say) counts as missing. */
function isMissing(err: unknown): boolean {
  return (err as Error)?.name === 'ObjectNotFoundError';
}

function count(result: ChainReplayResult, rev: Revision): void {
  result.revisions++;
  result.events += rev.events.length;
  for (const e of rev.events) {
    if (e.type === 'delete') result.deleted++;
    else if (e.version === 1) result.created++;
  }
}

/** Revisions per second and time left, at most once a second (a redrawn line on a terminal, JSON otherwise). */
class ReplayProgress {
  private readonly started = Date.now();
  private last = 0;

  constructor(
    private readonly logger: Logger,
    private readonly from: number,
    private readonly to: number,
  ) {}

  update(revision: number): void {
    const now = Date.now();
    if (now - this.last < 1000) return;
    this.last = now;
    this.report(revision);
  }

  done(revision: number): void {
    this.report(revision);
  }

  private report(revision: number): void {
    const seconds = (Date.now() - this.started) / 1000;
    const doneRevisions = revision - this.from;
    const rate = seconds > 0 ? doneRevisions / seconds : 0;
    const total = Math.max(1, this.to - this.from);
    this.logger.progress('replay', {
      revision,
      of: this.to,
      percent: Math.min(100, Math.floor((100 * doneRevisions) / total)),
      revisionsPerSecond: Math.round(rate),
      etaSeconds: rate > 0 ? Math.max(0, Math.round((this.to - revision) / rate)) : undefined,
    });
  }
}
