import {
  type CatalogEntry,
  compareWithEtcd,
  deltaStateEvidence,
  etcdRevisionAtLeast,
  forkFolder,
  type RevisionMatch,
} from '@etcd-steward/core/backup';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import { parseSnapshotName } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import type { Spool, SpooledDelta } from './spool.js';
import { spooledMetadata } from './spooled-metadata.js';

export interface SpoolProofOptions {
  spool: Spool;
  connection: EtcdConnection;
  /** The line of the watch now running: etcd's history as it holds it now, nothing to prove. */
  currentLine: number;
  /** Lines proven earlier in this term; those proven now are added. */
  proven: Set<number>;
  scratchDir: string;
  signal?: AbortSignal;
}

/**
 * The spooled snapshots that etcd's history does not hold, in spool order. A spooled snapshot is history like a
 * stored one, written from a watch that has ended: etcd may have been restored since (to the store's newest revision
 * or to an earlier one), and then goes on with another history from there. Each history line (SpooledDelta.line) is
 * compared with etcd at its newest snapshot's last revision: agreeing there proves the whole line, as a line holds
 * one history. Where it does not agree, its snapshots are compared from the oldest on, and the first that does not
 * agree and every later one of the line are not etcd's. Where etcd compacted the revision to compare, the events
 * inside are compared with etcd's present state (provenByState); a snapshot that cannot be proven so either (it
 * records nothing to compare) never goes into the chain.
 */
export async function unprovenSpool(options: SpoolProofOptions): Promise<SpooledDelta[]> {
  const lines = new Map<string, SpooledDelta[]>();
  for (const entry of options.spool.list()) {
    if (entry.line === options.currentLine || (entry.line !== null && options.proven.has(entry.line))) continue;
    const key = entry.line === null ? `id ${entry.id}` : String(entry.line);
    lines.set(key, [...(lines.get(key) ?? []), entry]);
  }
  if (lines.size === 0) return [];
  const newest = Math.max(...[...lines.values()].flat().map((e) => e.lastRevision));
  const etcdRevision = await etcdRevisionAtLeast(options.connection, newest, 5_000, options.signal);
  const view = spoolView(options.spool);
  const compare = (entry: SpooledDelta): Promise<RevisionMatch> =>
    compareWithEtcd(view, catalogEntry(entry), options.connection, etcdRevision, options.scratchDir, options.signal);
  const unproven: SpooledDelta[] = [];
  for (const line of lines.values()) {
    const atNewest = await compare(line[line.length - 1]);
    const match = (i: number) => (i === line.length - 1 ? atNewest : compare(line[i]));
    // Agreeing at its newest snapshot proves the whole line.
    let first = atNewest === 'same' ? line.length : 0;
    let told: RevisionMatch = atNewest;
    for (; first < line.length; first++) {
      told = await match(first);
      if (told !== 'same') break;
    }
    if (told === 'compacted') first = await provenByState(view, line, first, options);
    if (first < line.length) {
      unproven.push(...line.slice(first));
      continue;
    }
    if (line[0].line !== null) options.proven.add(line[0].line);
  }
  return unproven.sort((a, b) => a.id - b.id);
}

/**
 * Where etcd compacted a line's revisions before they could be compared: its deltas from `first` on are compared
 * with etcd's present state event by event (deltaStateEvidence). Those up to the last one holding a revision so
 * proven shared are etcd's, as long as none differs; returns the index of the first that is not proven.
 */
async function provenByState(
  view: SnapStore,
  line: readonly SpooledDelta[],
  first: number,
  options: SpoolProofOptions,
): Promise<number> {
  let proven = first;
  for (let i = first; i < line.length; i++) {
    const entry = catalogEntry(line[i]);
    if (entry.kind !== 'Incr') break;
    const told = await deltaStateEvidence(view, entry, options.connection, options.scratchDir, options);
    if (told.differentAt !== undefined) break;
    if (told.sameThrough !== undefined) proven = i + 1;
  }
  return proven;
}

/**
 * Moves spooled snapshots into the store's `forks/` (as etcd-steward sets aside an abandoned history: kept, never
 * listed), each removed from the spool once stored. Returns the folder.
 */
export async function setAsideSpooled(
  store: SnapStore,
  spool: Spool,
  entries: readonly SpooledDelta[],
  signal?: AbortSignal,
): Promise<string> {
  const folder = forkFolder(Math.max(0, entries[0].startRevision - 1));
  for (const entry of entries) {
    signal?.throwIfAborted();
    await store.put(`${folder}/${entry.name.split('/').pop()}`, spool.read(entry), {
      metadata: spooledMetadata(entry),
      signal,
    });
    await spool.remove(entry);
  }
  return folder;
}

function catalogEntry(entry: SpooledDelta): CatalogEntry {
  return { ...parseSnapshotName(entry.name)!, size: entry.bytes, metadata: spooledMetadata(entry) };
}

/** The spool as a store to read its snapshots from (what compareWithEtcd reads), and nothing else. */
function spoolView(spool: Spool): SnapStore {
  const readOnly = async (): Promise<never> => {
    throw new Error('the spool is only read here');
  };
  return {
    location: `the spool ${spool.dir}`,
    get: async (name) => spool.read({ name }),
    stat: async () => undefined,
    list: async () => [],
    put: readOnly,
    delete: readOnly,
  };
}
