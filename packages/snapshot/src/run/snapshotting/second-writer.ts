import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Readable } from 'node:stream';
import { errorMessage, type Logger } from '@etcd-steward/core/common';
import {
  METADATA_SHA256,
  ObjectNotFoundError,
  type PutOptions,
  type SnapStore,
  storeFile,
} from '@etcd-steward/core/store';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ForwardingStore } from './forwarding-store.js';

/**
 * The record the leading sidecar keeps in the store while it writes: who wrote last, beside the maintenance lock
 * (outside `v1/` and `v2/`, so ebr ignores it).
 */
export const WRITER_RECORD = 'locks/snapshot-writer.json';

interface WriterRecord {
  /** This process's random id: another sidecar's record has another. */
  writer: string;
  holder: string;
  pid: number;
  at: string;
  /** The object its writer was about to write when it wrote the record. */
  object: string;
}

export interface SecondWriterOptions {
  logger: Logger;
  registry: Registry;
  /** The record is read and written at most this often, at a put (default 5 s). */
  recordEveryMs?: number;
  /** /healthz fails and the gauge is 1 until this long after the last sign of another writer (default 5 min). */
  reportForMs?: number;
}

/**
 * Another sidecar writing snapshots to the same store, seen and said (log, metric, /healthz): an old pod not yet
 * gone whose sidecar, like this one, finds its member leading. etcd's leadership cannot tell them apart, and their
 * chains interleave: deltas under identical names with different bytes, or the same revisions twice.
 *
 * A wrapper around the store the snapshot terms write (as the FencedStore is), so the chain's own code is left as
 * it is. At each put, at most every `recordEveryMs`, it reads WRITER_RECORD and writes its own: a record of
 * another writer found after this term wrote its own means another writes now (a previous leader's record, found
 * before, is a hand-over). And a snapshot whose name already holds other bytes (its recorded sha256 differs), or
 * holds other bytes just after this put, was written by another. Only seeing and saying: which of the two
 * sidecars should stop is the operator's call.
 */
export class SecondWriterCheck extends ForwardingStore {
  private readonly id = randomBytes(8).toString('hex');
  private readonly recordEveryMs: number;
  private readonly reportForMs: number;
  private readonly detections: Counter;
  /** When this term last wrote its record; undefined before its first (a new term, after beginTerm). */
  private recordWritten?: number;
  private lastSeen?: number;

  constructor(
    inner: SnapStore,
    private readonly options: SecondWriterOptions,
  ) {
    super(inner);
    this.recordEveryMs = options.recordEveryMs ?? 5_000;
    this.reportForMs = options.reportForMs ?? 5 * 60_000;
    const registers = [options.registry];
    this.detections = new Counter({
      name: 'etcd_snapshot_second_writer_detections_total',
      help: 'Times another sidecar was seen writing snapshots to the store this one writes (each sign of it once)',
      registers,
    });
    const healthy = () => this.healthy();
    new Gauge({
      name: 'etcd_snapshot_second_writer',
      help: 'Whether another sidecar wrote snapshots to the store this one writes, lately (1: yes, see the log)',
      registers,
      collect() {
        this.set(healthy() ? 0 : 1);
      },
    });
  }

  /** A new leadership term: a record found before this term's first is a previous leader's, not a second writer. */
  beginTerm(): void {
    this.recordWritten = undefined;
  }

  /** false while another writer was seen within reportForMs. */
  healthy(): boolean {
    return this.lastSeen === undefined || Date.now() - this.lastSeen > this.reportForMs;
  }

  override async put(name: string, body: Readable, options?: PutOptions): Promise<void> {
    const sha256 = await this.before(name, options);
    await this.inner.put(name, body, options);
    await this.after(name, sha256);
  }

  override async putFile(name: string, path: string, options?: PutOptions): Promise<void> {
    const sha256 = await this.before(name, options);
    await storeFile(this.inner, name, path, options);
    await this.after(name, sha256);
  }

  /** The record, and what the name holds already; the sha256 this put records, if any. */
  private async before(name: string, options: PutOptions | undefined): Promise<string | undefined> {
    const sha256 = options?.metadata?.[METADATA_SHA256];
    await this.quietly(async () => {
      await this.exchangeRecord(name);
      const existing = sha256 && (await this.inner.stat(name));
      const theirs = existing ? existing.metadata[METADATA_SHA256] : undefined;
      if (theirs && theirs !== sha256)
        this.seen(`${name} is in the store already, with other bytes (sha256 ${theirs})`);
    });
    return sha256;
  }

  private async after(name: string, sha256: string | undefined): Promise<void> {
    if (!sha256) return;
    await this.quietly(async () => {
      const theirs = (await this.inner.stat(name))?.metadata[METADATA_SHA256];
      if (theirs && theirs !== sha256) this.seen(`${name} holds other bytes (sha256 ${theirs}) just after this put`);
    });
  }

  private async exchangeRecord(name: string): Promise<void> {
    if (this.recordWritten !== undefined && Date.now() - this.recordWritten < this.recordEveryMs) return;
    const found = await this.readRecord();
    if (found && found.writer !== this.id && this.recordWritten !== undefined) {
      this.seen(`${found.holder} (pid ${found.pid}) wrote its writer record at ${found.at}, before ${found.object}`);
    }
    const mine: WriterRecord = {
      writer: this.id,
      holder: hostname(),
      pid: process.pid,
      at: new Date().toISOString(),
      object: name,
    };
    await this.inner.put(WRITER_RECORD, Readable.from([Buffer.from(JSON.stringify(mine))]));
    this.recordWritten = Date.now();
  }

  private async readRecord(): Promise<WriterRecord | undefined> {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of await this.inner.get(WRITER_RECORD)) chunks.push(chunk as Buffer);
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as WriterRecord;
    } catch (err) {
      if (err instanceof ObjectNotFoundError || err instanceof SyntaxError) return undefined;
      throw err;
    }
  }

  private seen(sign: string): void {
    const first = this.healthy();
    this.lastSeen = Date.now();
    this.detections.inc();
    const message =
      'another sidecar writes snapshots to this store: two writers interleave their chains; stop the old pod (or give each cluster a --store of its own)';
    // An error line at the start of an episode; later signs of the same one are warnings.
    if (first) this.options.logger.error(message, { store: this.location, sign });
    else this.options.logger.warn(message, { store: this.location, sign });
  }

  /** The checks never fail a put: a store that does not answer them fails the put itself, which says so. */
  private async quietly(check: () => Promise<void>): Promise<void> {
    try {
      await check();
    } catch (err) {
      this.options.logger.warn('cannot check for another sidecar writing to the store', {
        reason: errorMessage(err),
      });
    }
  }
}
