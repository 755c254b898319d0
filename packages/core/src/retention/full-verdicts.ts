import type { SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256 } from '../store/stored-digest.js';

/** Whether a full snapshot verified: passed, or why it did not. */
export type FullVerdict = { ok: true } | { ok: false; reason: string };

/**
 * What a long-running garbage collector learned of full snapshots, so that it reads each one once: the sidecar
 * runs gc every --garbage-collection-period (ebr's default: a minute), and reading the newest full to verify it
 * means downloading it whole (gigabytes, for a large db) each time. A verdict is kept by the object's name and
 * what a HEAD says of its version: size, last-modified time and recorded sha256. An object overwritten since (another
 * size or time, other bytes recorded) is another object, and is read again. Only verdicts on the bytes themselves
 * are kept (verified, or damaged); one that depends on the keys or the network is not. Entries for names the store
 * no longer lists are dropped at each run, so this holds at most one entry a full snapshot in the store.
 */
export class FullVerdicts {
  private readonly verdicts = new Map<string, { version: string; verdict: FullVerdict }>();

  /** The object's version as the store says it now; undefined when it is gone. */
  async version(store: SnapStore, name: string): Promise<string | undefined> {
    const object = await store.stat(name);
    if (!object) return undefined;
    return `${object.size}/${object.lastModified.getTime()}/${object.metadata[METADATA_SHA256] ?? ''}`;
  }

  get(name: string, version: string | undefined): FullVerdict | undefined {
    const known = this.verdicts.get(name);
    return version !== undefined && known?.version === version ? known.verdict : undefined;
  }

  set(name: string, version: string | undefined, verdict: FullVerdict): void {
    if (version !== undefined) this.verdicts.set(name, { version, verdict });
  }

  /** Forgets the fulls a listing no longer holds. */
  keepOnly(names: Iterable<string>): void {
    const listed = new Set(names);
    for (const name of this.verdicts.keys()) if (!listed.has(name)) this.verdicts.delete(name);
  }
}
