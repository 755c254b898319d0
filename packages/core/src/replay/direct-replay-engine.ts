import { closeSync, constants, ftruncateSync, openSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { commitBuckets, writeBucket } from '../bbolt/bbolt-commit.js';
import { type BboltMeta, BboltReader, type BucketValue } from '../bbolt/bbolt-file.js';
import { LeafBuilder, PageAppender, writeBranches } from '../bbolt/bbolt-page-writer.js';
import { storeRevision } from '../bbolt/db-file-revision.js';
import { revisionKey } from '../bbolt/revision-key.js';
import { IntegrityError, OperationError } from '../common/errors.js';
import type { Revision } from '../format/delta-revisions.js';
import { type FullSnapshotFacts, SNAPSHOT_TRAILER } from '../format/full-snapshot-check.js';
import { appendSha256Trailer } from '../format/sha256-trailer.js';
import { eventRecord, leaseRecord } from './etcd-backend-records.js';
import { BaseNotAsPreparedError, type PreparedBase, type ReplayEngine } from './replay-engine.js';
import { DEFAULT_REPLAYED_LEASE_TTL } from './replay-events.js';

/**
 * Writes the revisions straight into a bbolt db — the full snapshot's file — as etcd's mvcc would have stored
 * them, with no etcd running and no round trip per revision (docs/etcd-formats.md §7). etcd keeps no revision
 * counter: at start-up it takes the revision from the last row of the `key` bucket, whose keys are revisions, so new
 * revisions only ever go after every existing row.
 *
 * The file is extended copy-on-write, as bbolt itself commits: the existing leaf pages stay where they are;
 * new rows fill new leaf pages appended at the end, and new branch pages, `key` and `lease` bucket roots, a
 * root bucket page and two meta pages make the new tree. Pages the old tree used and the new one does not
 * are free, which bbolt works out by itself on open (etcd stores no freelist). Every other bucket — meta,
 * membership, auth, alarms — is kept as it was.
 *
 * A put's watch event carries the exact KeyValue etcd stored, and a tombstone is the key alone, so the rows
 * are byte-identical to etcd's own. Leases the events name but the snapshot lacks are added as a lease
 * grant would add them (their original TTL is unknown: `leaseTtl`). The new tree's revision is read back
 * before the result is handed on, the restore then starts etcd on it, and the tests hold its rows to the
 * gRPC engine's, byte for byte.
 *
 * Since new rows go after every row of the base, their leaf pages do not depend on it: prepared (`prepare`), the
 * engine writes them from a page past where the base will end, while the base is still being written into the same
 * file, and `open` then puts the base's leaves ahead of them. The pages between the base's end and the first new one
 * (the base file's unused tail, its trailer) are free, as the base's own unused pages are.
 */
export class DirectReplayEngine implements ReplayEngine {
  readonly name = 'direct';
  private fd?: number;
  private file = '';
  private reader?: BboltReader;
  private meta?: BboltMeta;
  private buckets = new Map<string, BucketValue>();
  private pages?: PageAppender;
  private keyRows?: LeafBuilder;
  private leases = new Set<bigint>();
  private newLeases = new Set<bigint>();
  private revision = 0;
  private prepared?: PreparedBase;

  constructor(private readonly options: { leaseTtl?: number } = {}) {}

  async prepare(early: PreparedBase): Promise<void> {
    this.file = early.file;
    // created by whichever comes first, this or the base's writer; neither truncates it
    this.fd = openSync(early.file, constants.O_RDWR | constants.O_CREAT);
    this.pages = new PageAppender(this.fd, early.pageSize, early.firstPgid);
    this.keyRows = new LeafBuilder(this.pages);
    this.revision = early.revision;
    this.prepared = early;
  }

  /** Takes over the db file: it is extended in place, then renamed by `finish` or left in place by `finishInPlace`. */
  async open(base: { file: string; revision: number }): Promise<void> {
    if (this.prepared) return this.openPrepared(base.revision);
    this.file = base.file;
    this.fd = openSync(base.file, 'r+');
    const { reader, key } = this.readBase();
    const { pgid, pageSize } = reader.meta;
    // Drop etcd's sha256 trailer: new pages start right after the last page.
    ftruncateSync(this.fd, pgid * pageSize);
    this.pages = new PageAppender(this.fd, pageSize, pgid);
    this.keyRows = new LeafBuilder(this.pages, key.inline ? undefined : reader.leafRefs(key.root));
    // An inline (tiny) key bucket has no pages to keep: its rows start the new leaves.
    if (key.inline) {
      for (const row of reader.elements(key)) this.keyRows.add(Buffer.from(row.key), Buffer.from(row.value));
    }
    this.revision = base.revision;
  }

  /** The base, now written, under the rows applied since `prepare`. */
  private openPrepared(revision: number): void {
    const early = this.prepared!;
    const { reader, key } = this.readBase();
    const { pageSize, pgid } = reader.meta;
    if (revision !== early.revision || pageSize !== early.pageSize || pgid > early.firstPgid || key.inline) {
      throw new BaseNotAsPreparedError(
        `the full snapshot holds revision ${revision} in ${pgid} pages of ${pageSize} bytes${key.inline ? ' (its key bucket inline)' : ''}, where revision ${early.revision} in at most ${early.firstPgid} pages of ${early.pageSize} bytes was assumed`,
      );
    }
    this.keyRows!.putBefore(reader.leafRefs(key.root));
    for (const id of this.leases) this.newLeases.delete(id);
    this.prepared = undefined;
  }

  /** The base db in the open file: its meta, buckets and leases taken; its reader and `key` bucket returned. */
  private readBase(): { reader: BboltReader; key: BucketValue } {
    const reader = new BboltReader(this.fd!);
    this.reader = reader;
    this.meta = reader.meta;
    this.buckets = reader.buckets();
    const key = this.buckets.get('key');
    if (!key) throw new IntegrityError('the full snapshot has no "key" bucket: it is not an etcd database');
    const lease = this.buckets.get('lease');
    if (lease) for (const row of reader.elements(lease)) this.leases.add(row.key.readBigInt64BE(0));
    return { reader, key };
  }

  apply(rev: Revision): undefined {
    if (!this.keyRows) throw new Error('DirectReplayEngine.apply before open');
    if (rev.revision <= this.revision) {
      throw new OperationError(
        `revision ${rev.revision} does not follow revision ${this.revision}: rows must only grow`,
      );
    }
    rev.events.forEach((e, sub) => {
      this.keyRows!.add(revisionKey(rev.revision, sub, e.type === 'delete'), eventRecord(e));
      if (e.type === 'put' && e.lease !== '0' && e.lease !== '') {
        const id = BigInt(e.lease);
        if (!this.leases.has(id)) this.newLeases.add(id);
      }
    });
    this.revision = rev.revision;
  }

  async checkpoint(expectedRevision: number): Promise<void> {
    if (this.revision !== expectedRevision) {
      throw new OperationError(`the rewritten db is at revision ${this.revision}, expected ${expectedRevision}`);
    }
  }

  async finish(file: string): Promise<FullSnapshotFacts> {
    const facts = this.seal(this.commit());
    closeSync(this.fd!);
    this.fd = undefined;
    await rename(this.file, file);
    return facts;
  }

  async finishInPlace(): Promise<number> {
    this.commit();
    const revision = this.readBack();
    closeSync(this.fd!);
    this.fd = undefined;
    return revision;
  }

  async close(): Promise<void> {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  /** The lease bucket again, with rows for leases the events name and the snapshot lacks. */
  private rewriteLeases(): BucketValue {
    const ttl = this.options.leaseTtl ?? DEFAULT_REPLAYED_LEASE_TTL;
    const old = this.buckets.get('lease');
    const rows: Array<{ key: Buffer; value: Buffer }> = old
      ? [...this.reader!.elements(old)].map((r) => ({ key: Buffer.from(r.key), value: Buffer.from(r.value) }))
      : [];
    for (const id of this.newLeases) rows.push(leaseRecord(id, ttl));
    rows.sort((a, b) => Buffer.compare(a.key, b.key));
    return writeBucket(this.pages!, rows, old?.sequence ?? 0n);
  }

  /** Writes the new tree's `key` branches and bucket pages, then the root and metas that make it current; returns the size. */
  private commit(): number {
    this.buckets.set('key', {
      root: writeBranches(this.pages!, this.keyRows!.finish()),
      sequence: this.buckets.get('key')!.sequence,
    });
    if (this.newLeases.size > 0) this.buckets.set('lease', this.rewriteLeases());
    return commitBuckets(this.fd!, this.pages!, this.meta!, this.buckets);
  }

  /** Reads the revision back from the new tree, independently of what was written. */
  private readBack(): number {
    const revision = storeRevision(new BboltReader(this.fd!));
    if (revision !== this.revision) {
      throw new OperationError(`the rewritten db reads back as revision ${revision}, expected ${this.revision}`);
    }
    return revision;
  }

  /** Hashes the finished db for the snapshot trailer, and reads the revision back. */
  private seal(size: number): FullSnapshotFacts {
    const digest = appendSha256Trailer(this.fd!, size);
    return { size: size + SNAPSHOT_TRAILER, revision: this.readBack(), dbSha256: digest.toString('hex') };
  }
}
