import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fsyncPath, UsageError } from '@etcd-steward/core/common';
import { assertSnapshotName, parseSnapshotName } from '@etcd-steward/core/format';
import Database from 'better-sqlite3';

/**
 * A delta written to local disk and not yet in the store; or a full snapshot, taken into the spool when the store
 * did not answer and the chain's position was unknown (spoolFullSnapshot).
 */
export interface SpooledDelta {
  id: number;
  /** Its object name in the store, e.g. `v2/Incr-00000043-00000090-1795299379.zst`. */
  name: string;
  startRevision: number;
  lastRevision: number;
  bytes: number;
  /** Hex sha256 of the bytes, recorded as object metadata when it is uploaded. */
  sha256: string;
  /** When its oldest event was seen (ms since the epoch), for the delta lag. */
  oldestEventAt: number;
  /** A full snapshot's etcd version, recorded as object metadata when it is uploaded; null for a delta. */
  etcdVersion: string | null;
  /**
   * Bytes before compression (a delta's JSON and trailer, a full snapshot's db), recorded as object metadata when
   * it is uploaded, so that a restore decompresses no more than that; null when unknown (spooled by an older version).
   */
  decompressedBytes: number | null;
  /**
   * The history line it was written in (Spool.newLine): one watch of one etcd from one chain position, or one full
   * snapshot. A line holds one history, so etcd agreeing with its newest snapshot proves the whole line; null for
   * a snapshot spooled by an older version, a line of its own.
   */
  line: number | null;
  /** A full snapshot's revision digest (revision-digest.ts), recorded as object metadata when it is uploaded. */
  revisionDigest: string | null;
  /**
   * A delta's revisions read back from etcd's history rather than received live (format/read-back.ts's value),
   * recorded as object metadata when it is uploaded; null for a full snapshot, or a delta spooled by an older version.
   */
  readBack?: string | null;
}

export type NewDelta = Pick<SpooledDelta, 'name' | 'startRevision' | 'lastRevision' | 'oldestEventAt'> & {
  etcdVersion?: string | null;
  line?: number | null;
  revisionDigest?: string | null;
  readBack?: string | null;
  /** When the bytes given are already compressed; otherwise what the source gives is counted. */
  decompressedBytes?: number | null;
};

export function isSpooledFull(entry: SpooledDelta): boolean {
  return parseSnapshotName(entry.name)?.kind === 'Full';
}

/** A delta being written into the spool (Spool.begin). */
export interface SpoolDraft {
  /** Waits for the source to end, then makes the file durable under the delta's name and queues it. */
  commit(delta: NewDelta): Promise<SpooledDelta>;
  /** Stops writing and removes what was written. */
  discard(): Promise<void>;
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS deltas (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    start_revision INTEGER NOT NULL,
    last_revision INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    oldest_event_at INTEGER NOT NULL,
    etcd_version TEXT,
    decompressed_bytes INTEGER,
    line INTEGER,
    revision_digest TEXT,
    read_back TEXT
  );
  CREATE TABLE IF NOT EXISTS lines (id INTEGER PRIMARY KEY AUTOINCREMENT)`;

const COLUMNS =
  'id, name, start_revision AS startRevision, last_revision AS lastRevision, bytes, sha256, oldest_event_at AS oldestEventAt, etcd_version AS etcdVersion, decompressed_bytes AS decompressedBytes, line, revision_digest AS revisionDigest, read_back AS readBack';

/**
 * The sidecar's durable queue of deltas on their way to the store (`--spool-dir`), after the full snapshot that
 * starts their chain when the store did not answer at the term's start: each is a file, fsynced
 * and renamed into place before its row goes into a SQLite index (WAL, synchronous=FULL), so after a crash the
 * index lists exactly the complete files, in chain order. Files without a row are the remains of an interrupted
 * write and go at open. `--spool-max-bytes` caps the finished files; a full spool refuses more (hasRoom), and
 * the snapshotter then stops reading the watch until uploads make room. The part file of the delta being written
 * comes on top, bounded by the delta's own limit.
 */
export class Spool {
  private constructor(
    readonly dir: string,
    readonly maxBytes: number,
    private readonly db: Database.Database,
  ) {}

  static async open(dir: string, maxBytes: number): Promise<Spool> {
    let db: Database.Database;
    try {
      await mkdir(join(dir, 'deltas'), { recursive: true });
      db = new Database(join(dir, 'spool.db'));
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.exec(SCHEMA);
      // A spool written before full snapshots could wait in it.
      const columns = db.prepare('PRAGMA table_info(deltas)').all() as Array<{ name: string }>;
      if (!columns.some((c) => c.name === 'etcd_version')) db.exec('ALTER TABLE deltas ADD COLUMN etcd_version TEXT');
      // ... and before their decompressed size was recorded.
      if (!columns.some((c) => c.name === 'decompressed_bytes')) {
        db.exec('ALTER TABLE deltas ADD COLUMN decompressed_bytes INTEGER');
      }
      // ... and before history lines.
      if (!columns.some((c) => c.name === 'line')) {
        db.exec('ALTER TABLE deltas ADD COLUMN line INTEGER; ALTER TABLE deltas ADD COLUMN revision_digest TEXT');
      }
      // ... and before read-back revisions.
      if (!columns.some((c) => c.name === 'read_back')) db.exec('ALTER TABLE deltas ADD COLUMN read_back TEXT');
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new UsageError(`--spool-dir ${dir}: cannot keep a spool there (${reason}); give a writable directory`);
    }
    const spool = new Spool(dir, maxBytes, db);
    await spool.recover();
    return spool;
  }

  get depth(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM deltas').get() as { n: number }).n;
  }

  get bytes(): number {
    return (this.db.prepare('SELECT coalesce(sum(bytes), 0) AS b FROM deltas').get() as { b: number }).b;
  }

  /** A new history line (SpooledDelta.line), never given before in this spool. */
  newLine(): number {
    return Number(this.db.prepare('INSERT INTO lines DEFAULT VALUES').run().lastInsertRowid);
  }

  hasRoom(): boolean {
    return this.bytes < this.maxBytes;
  }

  /** Oldest first: the order they must reach the store in. */
  list(): SpooledDelta[] {
    return this.db.prepare(`SELECT ${COLUMNS} FROM deltas ORDER BY id`).all() as SpooledDelta[];
  }

  first(): SpooledDelta | undefined {
    return this.db.prepare(`SELECT ${COLUMNS} FROM deltas ORDER BY id LIMIT 1`).get() as SpooledDelta | undefined;
  }

  last(): SpooledDelta | undefined {
    return this.db.prepare(`SELECT ${COLUMNS} FROM deltas ORDER BY id DESC LIMIT 1`).get() as SpooledDelta | undefined;
  }

  /** Writes a delta (`source` through `transforms`) durably; once this resolves, it survives a crash. */
  async add(delta: NewDelta, source: Readable, ...transforms: Transform[]): Promise<SpooledDelta> {
    return this.begin(source, ...transforms).commit(delta);
  }

  /**
   * Starts writing a delta as its bytes come (`source` through `transforms`), before its name is known: the
   * bytes go to a part file, which becomes a spooled delta only at commit. Until then nothing is visible, and
   * after a crash the part goes at the next open. `transforms` compress: what the source gives is the delta's
   * decompressed size (unless the delta says it).
   */
  begin(source: Readable, ...transforms: Transform[]): SpoolDraft {
    const part = this.partFile();
    const written = this.writePart(part, source, transforms);
    written.catch(() => {}); // commit reports it
    return {
      commit: async (delta) => {
        const { bytes, sha256, sourceBytes } = await written;
        const decompressedBytes = delta.decompressedBytes ?? (transforms.length > 0 ? sourceBytes : null);
        await this.place(part, delta.name);
        const { lastInsertRowid } = this.db
          .prepare(
            'INSERT INTO deltas (name, start_revision, last_revision, bytes, sha256, oldest_event_at, etcd_version, decompressed_bytes, line, revision_digest, read_back) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
          )
          .run(
            delta.name,
            delta.startRevision,
            delta.lastRevision,
            bytes,
            sha256,
            delta.oldestEventAt,
            delta.etcdVersion ?? null,
            decompressedBytes,
            delta.line ?? null,
            delta.revisionDigest ?? null,
            delta.readBack ?? null,
          );
        return {
          id: Number(lastInsertRowid),
          ...delta,
          bytes,
          sha256,
          etcdVersion: delta.etcdVersion ?? null,
          decompressedBytes,
          line: delta.line ?? null,
          revisionDigest: delta.revisionDigest ?? null,
          readBack: delta.readBack ?? null,
        };
      },
      discard: async () => {
        source.destroy();
        await written.catch(() => {});
        await rm(part, { force: true });
      },
    };
  }

  /** Writes `source` through `transforms` into `part`, measuring what lands there; a failed write leaves nothing. */
  private async writePart(
    part: string,
    source: Readable,
    transforms: Transform[],
  ): Promise<{ bytes: number; sha256: string; sourceBytes: number }> {
    const hash = createHash('sha256');
    let bytes = 0;
    let sourceBytes = 0;
    const measure = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        bytes += chunk.length;
        done(null, chunk);
      },
    });
    const count = new Transform({
      transform(chunk: Buffer, _enc, done) {
        sourceBytes += chunk.length;
        done(null, chunk);
      },
    });
    try {
      await pipeline([source, count, ...transforms, measure, createWriteStream(part)]);
    } catch (err) {
      await rm(part, { force: true });
      throw err;
    }
    return { bytes, sha256: hash.digest('hex'), sourceBytes };
  }

  /** Gives a written part file its final name: fsynced, then renamed and its directory fsynced. */
  private async place(part: string, name: string): Promise<void> {
    try {
      await fsyncPath(part);
      await rename(part, this.fileOf(name));
      await fsyncPath(join(this.dir, 'deltas'));
    } catch (err) {
      await rm(part, { force: true });
      throw err;
    }
  }

  read(delta: Pick<SpooledDelta, 'name'>): Readable {
    return createReadStream(this.fileOf(delta.name));
  }

  async remove(delta: SpooledDelta): Promise<void> {
    this.db.prepare('DELETE FROM deltas WHERE id = ?').run(delta.id);
    await rm(this.fileOf(delta.name), { force: true });
  }

  async clear(): Promise<void> {
    for (const delta of this.list()) await this.remove(delta);
  }

  close(): void {
    this.db.close();
  }

  /** Drops files an interrupted write left without a row, and rows whose file is gone. */
  private async recover(): Promise<void> {
    const listed = new Set<string>();
    for (const delta of this.list()) {
      listed.add(this.fileOf(delta.name));
    }
    const present = new Set<string>();
    for (const entry of await readdir(join(this.dir, 'deltas'))) {
      const file = join(this.dir, 'deltas', entry);
      if (listed.has(file)) present.add(file);
      else await rm(file, { force: true });
    }
    for (const delta of this.list()) {
      // The chain check at upload sees the gap this leaves and resynchronises from the store.
      if (!present.has(this.fileOf(delta.name))) this.db.prepare('DELETE FROM deltas WHERE id = ?').run(delta.id);
    }
  }

  /** A file being written gets a name of its own; any such file without a row goes at the next open. */
  private partFile(): string {
    return join(this.dir, 'deltas', `${randomUUID()}.part`);
  }

  private fileOf(name: string): string {
    const ref = assertSnapshotName(name); // names are ours, but never let one reach outside the spool
    return join(this.dir, 'deltas', ref.name.slice(ref.name.lastIndexOf('/') + 1));
  }
}
