import { errorMessage } from '../common/errors.js';
import type { ObjectVersion, SnapStore, StoredObject } from '../store/snapstore.js';

/*
 * Snapshots read through the versions a store keeps (S3 bucket versioning; docs/stores.md, "Immutable stores"). Where
 * Object Lock keeps every version, a delete without a version id only hides a snapshot behind a delete marker, and a
 * put over it only adds a newer version: the stored bytes are all still there, which is what an attack or a mistake
 * leaves. So a catalog listed with versions (snapshot-catalog.ts) takes a hidden snapshot from its newest version,
 * and a read whose version does not verify goes on to the next older one (readThroughVersions); whatever is read
 * other than from the current version is recorded as recovered (object, version, why), for the program's log and
 * result, and for verify's alarm.
 */

/** Where a catalog entry's bytes come from, in a catalog listed with versions. */
export interface EntryVersions {
  /** The store keeps versions; false: what was overwritten or deleted there is gone. */
  kept: boolean;
  /** The version to read; undefined: the current one. */
  id?: string;
  /** Why not the current version: a delete marker hides the name, or the current version does not verify. */
  why?: string;
  /** The name's older versions (delete markers left out), newest first: read in turn should this one not verify. */
  older: Array<Pick<ObjectVersion, 'versionId' | 'size' | 'lastModified'>>;
  /** Newer versions passed over on the way here, each with why. */
  passedOver: Array<{ versionId: string; reason: string }>;
}

/** A snapshot read from a version other than its current one, as programs report it. */
export interface RecoveredObject {
  name: string;
  versionId: string;
  why: string;
  /** Newer versions that did not verify either. */
  passedOver?: Array<{ versionId: string; reason: string }>;
}

/** How each program's summary names a recovered object, under `label` (styled, where the terminal shows colour). */
export function recoveredLine(r: RecoveredObject, label = 'RECOVERED'): string {
  return `  ${label} ${r.name} from its version ${r.versionId}: ${r.why}`;
}

/** What a program does with each recovered object: log it, and list it in its result. */
export type OnRecovered = (recovered: RecoveredObject) => void;

interface Versioned {
  name: string;
  size: number;
  metadata: Record<string, string>;
  versions?: EntryVersions;
}

/**
 * The objects a listing with versions shows, each with where its bytes come from: a name's current version; a name
 * whose current version is a delete marker, from its newest version under the marker (only for names `hidden`
 * accepts: snapshots, which is what a restore reads; other objects stay deleted).
 */
export function currentOrHidden(
  versions: readonly ObjectVersion[],
  hidden: (name: string) => boolean,
): Array<StoredObject & { versions: EntryVersions }> {
  const byName = new Map<string, ObjectVersion[]>();
  for (const v of versions) byName.set(v.name, [...(byName.get(v.name) ?? []), v]);
  const out: Array<StoredObject & { versions: EntryVersions }> = [];
  for (const [name, list] of byName) {
    const [newest] = list;
    const objects = list.filter((v) => !v.deleteMarker);
    const read = objects[0];
    if (!read || (newest.deleteMarker && !hidden(name))) continue;
    const older = objects.slice(1).map(({ versionId, size, lastModified }) => ({ versionId, size, lastModified }));
    out.push({
      name,
      size: read.size,
      lastModified: read.lastModified,
      metadata: {},
      versions: newest.deleteMarker
        ? {
            kept: true,
            id: read.versionId,
            why: `hidden by a delete marker since ${newest.lastModified.toISOString()}`,
            older,
            passedOver: [],
          }
        : { kept: true, older, passedOver: [] },
    });
  }
  return out;
}

/** The entry's version to read as a get or stat option, none for the current one. */
export function versionOf(entry: { versions?: EntryVersions }): { versionId?: string } {
  return entry.versions?.id === undefined ? {} : { versionId: entry.versions.id };
}

/** The metadata stored with the entry's version: its listing's, or a stat's where listings carry none (S3). */
export async function storedMetadata(
  store: SnapStore,
  entry: { name: string; metadata: Record<string, string>; versions?: EntryVersions },
): Promise<Record<string, string>> {
  if (Object.keys(entry.metadata).length > 0) return entry.metadata;
  return (await store.stat(entry.name, versionOf(entry)))?.metadata ?? {};
}

/** The entry read from its next older version, after this one failed with `reason`; undefined when none is left. */
export function olderVersion<T extends Versioned>(entry: T, reason: string): T | undefined {
  const v = entry.versions;
  const next = v?.kept ? v.older[0] : undefined;
  if (!v || !next) return undefined;
  return {
    ...entry,
    size: next.size,
    metadata: {}, // the version's own, asked for by a stat with its id
    versions: {
      kept: true,
      id: next.versionId,
      why: v.why ?? `its current version does not verify (${reason})`,
      older: v.older.slice(1),
      passedOver: v.id === undefined ? v.passedOver : [...v.passedOver, { versionId: v.id, reason }],
    },
  };
}

/** What was recovered by reading `entry`, when it was read from a version other than the current one. */
export function recoveredBy(entry: Versioned): RecoveredObject | undefined {
  const v = entry.versions;
  if (v?.id === undefined) return undefined;
  return {
    name: entry.name,
    versionId: v.id,
    why: v.why ?? 'read from an older version',
    ...(v.passedOver.length > 0 ? { passedOver: v.passedOver } : {}),
  };
}

/**
 * Reads `entry` with `read`, from the version the catalog chose; when that fails as `unusable` says (damage: the
 * recorded sha256, decryption, the name's revisions, decompression; or gone), from each older version in turn,
 * newest first, until one reads. The version that read is reported to `onRecovered` unless it is the current one.
 * When none reads, the first failure is thrown, saying whether older versions were tried or the store keeps none.
 */
export async function readThroughVersions<E extends Versioned, T>(
  entry: E,
  read: (entry: E) => Promise<T>,
  unusable: (err: unknown) => boolean,
  onRecovered?: OnRecovered,
): Promise<T> {
  let current = entry;
  let first: unknown;
  for (;;) {
    try {
      const value = await read(current);
      const recovered = recoveredBy(current);
      if (recovered) onRecovered?.(recovered);
      return value;
    } catch (err) {
      if (!unusable(err)) throw err;
      first ??= err;
      const next = olderVersion(current, errorMessage(err));
      if (!next) throw withVersionNote(first, entry, current !== entry);
      current = next;
    }
  }
}

/**
 * A failure of `entry` that no version recovers, saying why (the message is added to, the error keeps its class,
 * which callers tell damage and absence apart by).
 */
export function withVersionNote(err: unknown, entry: Versioned, olderTried: boolean): unknown {
  const note =
    entry.versions?.kept === false
      ? 'not recoverable: the bucket keeps no versions (docs/stores.md, "Immutable stores")'
      : olderTried
        ? 'no older version of it verifies either'
        : entry.versions?.kept
          ? 'the bucket keeps no older version of it'
          : undefined;
  if (note && err instanceof Error && !err.message.includes(note)) err.message = `${err.message}; ${note}`;
  return err;
}
