import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type CatalogEntry, catalogStore } from '../backup/snapshot-catalog.js';
import { type RecoveredObject, readThroughVersions, versionOf } from '../backup/stored-versions.js';
import { IntegrityError, OperationError } from '../common/errors.js';
import { fsyncPath } from '../common/fsync-path.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { readKeyFile } from '../format/encryption/encryption-keys.js';
import { checkEnvelopeHeader } from '../format/encryption/envelope-header.js';
import { compareSnapshots } from '../format/snapshot-name.js';
import { openStore } from '../store/location.js';
import { type BackupFilters, checkFilters, filtering, selectBackups } from './backup-selection.js';
import { objectMetadata } from './copy-object.js';
import { CopyProgress } from './copy-progress.js';
import { discardSink } from './object-check.js';
import {
  buildManifest,
  loadTarStream,
  MANIFEST_ENTRY,
  type ManifestEncryption,
  OBJECTS_FOLDER,
} from './tar-manifest.js';
import { readEnvelope, tarObjectCheck } from './tar-object-check.js';
import { VerifiedBody } from './verified-body.js';

export interface ExportOptions extends BackupFilters {
  from: string;
  /** A file path, or `-` for stdout. */
  to: string;
  /** Keys that decrypt encrypted snapshots to check their content; the tar holds them encrypted all the same. */
  encryptionKeyFile?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

interface ExportedObject {
  entry: CatalogEntry;
  metadata: Record<string, string>;
  encryption?: ManifestEncryption;
}

export interface ExportSummary {
  from: string;
  to: string;
  objects: number;
  /** Stored bytes of the snapshots (the tar adds headers and padding). */
  bytes: number;
  /** The revision the exported chain restores to, when it is one chain. */
  lastRevision: number;
  /** Encrypted snapshots checked as stored bytes only, for want of a key (tar-object-check.ts). */
  storedBytesOnly: string[];
  /** Snapshots hidden or replaced since they were stored, exported from an older version (stored-versions.ts). */
  recovered: RecoveredObject[];
  durationMs: number;
  bytesPerSecond: number;
}

/**
 * Writes snapshots of a store into one tar file: a manifest first (names, sizes, revisions, recorded digests),
 * then every snapshot as stored, oldest first, each checked on the way as a copy checks it. Without filters,
 * the newest restorable chain. Encrypted snapshots stay encrypted; with keys, they are decrypted on the way to be
 * checked, and a missing or wrong key stops the export before it writes. A damaged object fails the export (a tar
 * entry's size is written before its bytes, so it cannot be left out midway); a file is written under a temp name
 * and renamed once complete.
 */
export async function exportBackups(options: ExportOptions): Promise<ExportSummary> {
  checkFilters(options);
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const keys = options.encryptionKeyFile === undefined ? undefined : readKeyFile(options.encryptionKeyFile);
  const from = await openStore(options.from);
  const stored = from.unwrap(); // the bytes as stored, encrypted or not
  try {
    // the source with its versions, as a restore reads it: what was hidden or replaced there is exported as stored
    const listed = await catalogStore(from, { versions: true });
    if (listed.versionsUnreadable) logger.warn(`${from.location}: ${listed.versionsUnreadable}`);
    const selection = selectBackups(listed.snapshots, filtering(options) ? options : { newestChainOnly: true }).sort(
      compareSnapshots,
    );
    if (selection.length === 0) throw new OperationError(`${from.location} holds no snapshots to export`);
    const objects: ExportedObject[] = [];
    const recovered: RecoveredObject[] = [];
    for (const listedEntry of selection) {
      const object = await readThroughVersions(
        listedEntry,
        async (entry) => {
          const label = `${from.location}/${entry.name}`;
          const encryption = await readEnvelope(
            await stored.get(entry.name, versionOf(entry)),
            entry,
            label,
            options.signal,
          );
          if (encryption && keys) checkEnvelopeHeader(Buffer.from(encryption.header, 'base64'), label, keys);
          const read: ExportedObject = { entry, metadata: await objectMetadata(from, entry), encryption };
          // A name with older versions is checked whole here, while another one can still be chosen: in the tar, a
          // failed check can only fail the export.
          if (entry.versions?.older.length) {
            const check = tarObjectCheck(buildManifest(from.location, [read]).objects[0], label, keys);
            await pipeline(await stored.get(entry.name, versionOf(entry)), new VerifiedBody(check), discardSink(), {
              signal: options.signal,
            });
          }
          return read;
        },
        (err) => err instanceof IntegrityError,
        (r) => {
          recovered.push(r);
          logger.warn('recovered a snapshot hidden or replaced since it was stored', { ...r });
        },
      );
      objects.push(object);
    }
    const exported = objects.map((o) => o.entry);
    const manifest = buildManifest(from.location, objects);
    const manifestBytes = Buffer.from(JSON.stringify(manifest, null, 1));
    const bytes = exported.reduce((n, e) => n + e.size, 0);
    const progress = new CopyProgress(logger, 'export', exported.length, bytes);
    const pack = (await loadTarStream()).pack();
    const write = async (output: Writable, end: boolean) => {
      const packing = pipeline(pack, output, { end, signal: options.signal });
      try {
        pack.entry({ name: MANIFEST_ENTRY, size: manifestBytes.length }, manifestBytes);
        for (const [i, { entry }] of objects.entries()) {
          const label = `${from.location}/${entry.name}`;
          const counter = new Transform({
            transform(chunk: Buffer, _enc, done) {
              progress.addBytes(chunk.length);
              done(null, chunk);
            },
          });
          await pipeline(
            await stored.get(entry.name, versionOf(entry)),
            counter,
            new VerifiedBody(tarObjectCheck(manifest.objects[i], label, keys)),
            pack.entry({
              name: `${OBJECTS_FOLDER}${entry.name}`,
              size: entry.size,
              mtime: new Date(entry.createdAt * 1000),
            }),
            { signal: options.signal },
          );
          progress.objectDone();
        }
        pack.finalize();
      } catch (err) {
        pack.destroy(err as Error);
        await packing.catch(() => undefined);
        throw err;
      }
      await packing;
    };
    if (options.to === '-') {
      await write(process.stdout, false);
    } else {
      const temp = join(dirname(options.to), `.${basename(options.to)}.${randomBytes(6).toString('hex')}.part`);
      try {
        await write(createWriteStream(temp), true);
        await fsyncPath(temp);
        await rename(temp, options.to);
      } finally {
        await rm(temp, { force: true });
      }
    }
    progress.report();
    return {
      from: from.location,
      to: options.to === '-' ? 'stdout' : options.to,
      objects: exported.length,
      bytes,
      lastRevision: exported[exported.length - 1].lastRevision,
      storedBytesOnly: keys ? [] : objects.filter((o) => o.encryption).map((o) => o.entry.name),
      recovered,
      durationMs: Date.now() - started,
      bytesPerSecond: Math.round(progress.rate()),
    };
  } finally {
    await from.close?.();
  }
}
