// Over 350 lines: the local provider whole: its writes and their commit, listing, metadata and the old layout's move.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, type Dirent } from 'node:fs';
import { copyFile, type FileHandle, mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { withLockFile, writeDurableTemp } from '../common/atomic-file.js';
import { UsageError } from '../common/errors.js';
import { fsyncPath } from '../common/fsync-path.js';
import { checkMetadata } from './metadata.js';
import { checkObjectName, RESERVED_FOLDERS } from './object-name.js';
import {
  type CopySource,
  type CopyWay,
  type GetOptions,
  ObjectNotFoundError,
  type PutOptions,
  type SnapStore,
  type StoredObject,
  StoreNotWritableError,
} from './snapstore.js';
import type { StoreLocation } from './store-url.js';
import { storedDigestMismatch } from './stored-digest.js';

/** Objects statted at once by a listing. */
const LISTING_CONCURRENCY = 256;
/** Kept out of listings: in-flight writes and object metadata live in these folders of the store root. */
const [META_DIR, TEMP_DIR] = RESERVED_FOLDERS;
/** A metadata file's name in the current layout, directly in the metadata folder. */
const CURRENT_META = /^[0-9a-f]{64}\.json$/;

/**
 * A directory as a store. Writes go to a temp file in the same file system, are fsynced and then renamed
 * into place, so a crash never leaves a partial object.
 *
 * ebr's Local provider walks the whole store folder and reads every file whose path contains `v1/` or `v2/` as
 * a snapshot named by what follows (a `.metadata/v2/Full-…gz.json` became its base, and its restore failed).
 * So every file here that is not an object has a name of hex digits (no `v`, no `-`): metadata is
 * `.metadata/<sha256 of the object name>.json`, a write in flight `.tmp/<random>.part`, a commit's lock
 * `.tmp/<sha256 of the object name>.lock` (withCommitLock). Stores written before
 * kept metadata at `.metadata/<object name>.json`: that is still read, and moved to the new name by the
 * first write.
 */
export class LocalStore implements SnapStore {
  readonly location: string;
  private migration: Promise<void> | undefined;

  constructor(private readonly root: string) {
    this.location = `file://${root}`;
  }

  put(name: string, body: Readable, options: PutOptions = {}): Promise<void> {
    return this.write(name, options, (temp) => pipeline(body, createWriteStream(temp), { signal: options.signal }));
  }

  /** Writes an object through a temp file that `fill` makes, committed once it succeeded, removed if it failed. */
  private async write(name: string, options: PutOptions, fill: (temp: string) => Promise<void>): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    try {
      await this.migrateLegacyMetadata();
      const temp = await this.tempPath();
      try {
        await fill(temp);
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
      await this.commit(temp, name, options);
    } catch (err) {
      throw this.writeFailure(err);
    }
  }

  /**
   * Moves a finished local file (which it consumes) into the store: a rename when it is on the store's file
   * system, saving a copy of a whole snapshot, else a copy.
   */
  async putFile(name: string, path: string, options: PutOptions = {}): Promise<void> {
    checkObjectName(name);
    checkMetadata(options.metadata);
    try {
      await this.migrateLegacyMetadata();
      const temp = await this.tempPath();
      try {
        await rename(path, temp);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
        await this.put(name, createReadStream(path), options);
        return await rm(path, { force: true });
      }
      await this.commit(temp, name, options);
    } catch (err) {
      throw this.writeFailure(err);
    }
  }

  /** Where an object's stored bytes are, as a file: a copy into another local store lets the kernel copy them. */
  copySource(name: string): CopySource {
    return { kind: 'file', path: this.path(name) };
  }

  /**
   * Stores a copy of another local store's file that the kernel makes (fs.copyFile: copy_file_range or a reflink
   * where the file system has them), then reads what landed back and commits it only if its sha256 is the one
   * expected: an IntegrityError otherwise, and nothing stored. A source gone is an ObjectNotFoundError of `source`.
   */
  async putCopy(
    name: string,
    source: CopySource,
    expected: { sha256: string },
    options: PutOptions & { source: string },
  ): Promise<CopyWay | undefined> {
    if (source.kind !== 'file') return undefined;
    await this.write(name, options, async (temp) => {
      await copyFile(source.path, temp).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'ENOENT' && err.path === source.path ? new ObjectNotFoundError(options.source, name) : err;
      });
      if ((await fileSha256(temp, options.signal)) !== expected.sha256) {
        throw storedDigestMismatch(`${options.source}/${name}`);
      }
    });
    return 'kernel';
  }

  private async tempPath(): Promise<string> {
    const temp = join(this.root, TEMP_DIR, `${randomBytes(8).toString('hex')}.part`);
    await makeFolder(dirname(temp));
    return temp;
  }

  /** A write the store refused (read-only, no permission), said so with the store and what to do; else `err`. */
  private writeFailure(err: unknown): unknown {
    const { code, path } = err as NodeJS.ErrnoException;
    const where = `the store ${this.location}`;
    const what = path === undefined ? '' : `: cannot write ${path}`;
    const user = process.getuid === undefined ? 'this program' : `this program (uid ${process.getuid()})`;
    if (code === 'EROFS') {
      const fix = 'mount its volume read-write, or give a store this program may write to';
      return new StoreNotWritableError(`${where} is read-only (EROFS)${what}: ${fix}`, { cause: err });
    }
    if (code !== 'EACCES' && code !== 'EPERM') return err;
    const fix = `give ${user} write access to the store's folder`;
    return new StoreNotWritableError(`${where} cannot be written: permission denied (${code})${what}: ${fix}`, {
      cause: err,
    });
  }

  /**
   * Makes a complete temp file the object: durable first, then visible by one rename, its metadata's before it,
   * then both renames durable. The syncs go in two rounds, the file's and its metadata's together, then both
   * folders': a copy of many small objects waited on four syncs one after another for each.
   */
  private async commit(temp: string, name: string, options: PutOptions): Promise<void> {
    const target = this.path(name);
    const metaPath = this.metaPath(name);
    const metadata =
      options.metadata && Object.keys(options.metadata).length > 0 ? JSON.stringify(options.metadata) : undefined;
    let metaTemp: string | undefined;
    try {
      [metaTemp] = await Promise.all([
        metadata === undefined ? undefined : writeDurableTemp(metadata, join(this.root, TEMP_DIR)),
        fsyncPath(temp),
        makeFolder(dirname(target)),
        metadata === undefined ? undefined : makeFolder(dirname(metaPath)),
      ]);
      const metaReady = metaTemp;
      await this.withCommitLock(name, async () => {
        await (metaReady === undefined ? rm(metaPath, { force: true }) : rename(metaReady, metaPath));
        metaTemp = undefined;
        await rename(temp, target);
      });
      await Promise.all([
        fsyncPath(dirname(target)),
        metadata === undefined ? undefined : fsyncPath(dirname(metaPath)),
      ]);
    } catch (err) {
      await rm(temp, { force: true });
      if (metaTemp !== undefined) await rm(metaTemp, { force: true });
      throw err;
    }
  }

  /**
   * Runs `fn` (the renames of one name's metadata and object, or their removal) while no other writer of this store
   * folder, in any process, commits the same name: the lock file `.tmp/<sha256 of the name>.lock`. Without it two
   * writers of one name (two sidecars on one store) could cross, A's metadata renamed, then B's, then B's object,
   * then A's, leaving A's object with B's sha256 (measured: about once in 150 pairs of concurrent puts).
   */
  private withCommitLock(name: string, fn: () => Promise<void>): Promise<void> {
    const lockPath = join(this.root, TEMP_DIR, `${createHash('sha256').update(name).digest('hex')}.lock`);
    return withLockFile(lockPath, COMMIT_LOCK_STALE_MS, fn);
  }

  async get(name: string, options: GetOptions = {}): Promise<Readable> {
    const path = this.path(name);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r'); // fails now, not mid-stream, when the object is missing
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw new ObjectNotFoundError(this.location, name, { cause: err });
      throw err;
    }
    return handle.createReadStream({ start: options.offset ?? 0 });
  }

  /**
   * Objects are statted `LISTING_CONCURRENCY` at a time, and the metadata folder is listed once rather than two
   * reads tried for every object (most have no metadata): a store of 100,000 objects lists in seconds.
   */
  async list(prefix = ''): Promise<StoredObject[]> {
    const names: string[] = [];
    await this.walk(this.root, prefix, names);
    const metaRoot = join(this.root, META_DIR);
    const metadataFiles = new Set(
      (await readdir(metaRoot, { recursive: true }).catch(() => [] as string[])).map((p) => join(metaRoot, p)),
    );
    const out: StoredObject[] = [];
    names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let i = 0; i < names.length; i += LISTING_CONCURRENCY) {
      const batch = names.slice(i, i + LISTING_CONCURRENCY);
      for (const object of await Promise.all(batch.map((name) => this.statObject(name, metadataFiles)))) {
        if (object) out.push(object);
      }
    }
    return out;
  }

  stat(name: string): Promise<StoredObject | undefined> {
    return this.statObject(name);
  }

  /** `metadataFiles`: the metadata files there are, when a listing knows them. */
  private async statObject(name: string, metadataFiles?: Set<string>): Promise<StoredObject | undefined> {
    try {
      const st = await stat(this.path(name));
      if (!st.isFile()) return undefined;
      return { name, size: st.size, lastModified: st.mtime, metadata: await this.readMetadata(name, metadataFiles) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async delete(name: string): Promise<void> {
    try {
      await this.migrateLegacyMetadata();
      // under the lock too: a delete crossing a put of the same name would leave one's metadata without its object
      await makeFolder(join(this.root, TEMP_DIR));
      await this.withCommitLock(name, async () => {
        await rm(this.path(name), { force: true });
        await rm(this.metaPath(name), { force: true });
      });
    } catch (err) {
      throw this.writeFailure(err);
    }
  }

  /** Once per store: metadata files of the earlier layout move to their new names (see the class comment). */
  private migrateLegacyMetadata(): Promise<void> {
    this.migration ??= this.moveLegacyMetadata(join(this.root, META_DIR));
    return this.migration;
  }

  private async moveLegacyMetadata(dir: string): Promise<void> {
    const metaRoot = join(this.root, META_DIR);
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => [] as Dirent[]);
    for (const entry of entries) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        await this.moveLegacyMetadata(full);
        await rmdir(full).catch(() => undefined); // left when something else is in it
      } else if (entry.name.endsWith('.json') && !(dir === metaRoot && CURRENT_META.test(entry.name))) {
        const name = relative(metaRoot, full).slice(0, -'.json'.length).split(sep).join('/');
        const current = this.metaPath(name);
        // a file at the new name was written later than the old one, and wins
        const superseded = await stat(current).then(
          () => true,
          () => false,
        );
        await (superseded ? rm(full, { force: true }) : rename(full, current));
      }
    }
  }

  /** The names of the files under `dir` that start with `prefix`. */
  private async walk(dir: string, prefix: string, out: string[]): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const entry of entries) {
      const full = join(dir, entry.name);
      const name = relative(this.root, full).split(sep).join('/');
      if (dir === this.root && (entry.name === TEMP_DIR || entry.name === META_DIR)) continue;
      if (entry.isDirectory()) {
        if (prefix.startsWith(`${name}/`) || `${name}/`.startsWith(prefix)) await this.walk(full, prefix, out);
      } else if (entry.isFile() && name.startsWith(prefix)) {
        out.push(name);
      }
    }
  }

  private async readMetadata(name: string, metadataFiles?: Set<string>): Promise<Record<string, string>> {
    for (const path of [this.metaPath(name), this.legacyMetaPath(name)]) {
      if (metadataFiles && !metadataFiles.has(path)) continue;
      try {
        return JSON.parse(await readFile(path, 'utf8')) as Record<string, string>;
      } catch {}
    }
    return {};
  }

  private path(name: string): string {
    checkObjectName(name);
    return join(this.root, ...name.split('/'));
  }

  private metaPath(name: string): string {
    return join(this.root, META_DIR, `${createHash('sha256').update(name).digest('hex')}.json`);
  }

  private legacyMetaPath(name: string): string {
    return `${join(this.root, META_DIR, ...name.split('/'))}.json`;
  }
}

/**
 * `mkdir -p` that says why it failed. Node's recursive mkdir reports a folder it cannot create on a read-only file
 * system as ENOENT ("no such file or directory", measured with Node 24), which points nowhere near the cause: each
 * missing folder is then created on its own, whose error is the true one (EROFS).
 */
async function makeFolder(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const missing: string[] = [];
    for (let d = dir; dirname(d) !== d && !(await stat(d).catch(() => undefined)); d = dirname(d)) missing.unshift(d);
    for (const d of missing) {
      await mkdir(d).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
      });
    }
  }
}

export async function openLocalStore(
  location: StoreLocation,
  options: { allowMissingFolder?: boolean } = {},
): Promise<SnapStore> {
  const root = location.container;
  if (!root.startsWith('/')) throw new UsageError(`--store ${location.url.href}: give an absolute path`);
  const existing = await checkRoot(location.url.href, root);
  if (existing !== root && !options.allowMissingFolder) {
    throw new UsageError(
      `${location.url.href}: the store's folder ${root} does not exist (the nearest folder that does is ${existing}): check the path for a typo, and that the volume that holds the store is mounted`,
    );
  }
  await removeStaleTemps(join(root, TEMP_DIR));
  return new LocalStore(root);
}

/**
 * Opening creates nothing (a restore from a mistyped path must leave no folder behind); the first put creates
 * the root. So that a writer still learns of a path it can never use before it starts, the root, or the
 * nearest folder above it that exists, must be a directory. Returns that folder.
 */
async function checkRoot(href: string, root: string): Promise<string> {
  for (let dir = root; ; dir = dirname(dir)) {
    const st = await stat(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined; // not there: look further up
      throw new UsageError(`--store ${href}: cannot use ${dir} (${err.code})`);
    });
    if (st?.isDirectory()) return dir;
    if (st) throw new UsageError(`--store ${href}: ${dir} is not a directory`);
    if (dir === '/') return dir;
  }
}

/** A commit holds its name's lock for two renames: one held this long was left by a writer killed between them. */
const COMMIT_LOCK_STALE_MS = 30_000;

/** A put being written touches its temp file continually; one untouched for an hour was left by a killed writer. */
const STALE_TEMP_MS = 60 * 60 * 1000;

/**
 * Best effort: a restore may read the store from a read-only mount, where the removal fails and the leftovers
 * harm nobody (listings skip the temp folder).
 */
async function removeStaleTemps(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const cutoff = Date.now() - STALE_TEMP_MS;
  for (const name of names) {
    const path = join(dir, name);
    const st = await stat(path).catch(() => undefined);
    if (st && st.mtimeMs < cutoff) await rm(path, { force: true }).catch(() => undefined);
  }
}

/** The sha256 of a file, read through one buffer: a copy's check leaves no garbage behind, however large the file. */
async function fileSha256(path: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(1 << 20);
  const handle = await open(path, 'r');
  try {
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) return hash.digest('hex');
      hash.update(buffer.subarray(0, bytesRead));
    }
  } finally {
    await handle.close();
  }
}
