import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type tar from 'tar-stream';
import { listSnapshots } from '../backup/snapshot-catalog.js';
import { errorMessage, IntegrityError, StewardError } from '../common/errors.js';
import { type Logger, silentLogger } from '../common/logger.js';
import { type KeyRing, readKeyFile } from '../format/encryption/encryption-keys.js';
import { checkEnvelopeHeader } from '../format/encryption/envelope-header.js';
import { METADATA_ENCRYPTION_KEY_ID } from '../store/encrypted-store.js';
import { openStore } from '../store/location.js';
import type { SnapStore } from '../store/snapstore.js';
import { METADATA_SHA256 } from '../store/stored-digest.js';
import type { DamagedObject } from './copy-backups.js';
import { alreadyHeld } from './copy-object.js';
import { CopyProgress } from './copy-progress.js';
import { DAMAGED_HEADER, TarHeaderGuard } from './tar-header-guard.js';
import {
  loadTarStream,
  MANIFEST_ENTRY,
  MAX_MANIFEST_BYTES,
  type ManifestObject,
  OBJECTS_FOLDER,
  parseManifest,
} from './tar-manifest.js';
import { tarObjectCheck } from './tar-object-check.js';
import { VerifiedBody } from './verified-body.js';

export interface ImportOptions {
  /** The tar file's bytes (a file, or stdin). */
  input: Readable;
  /** For messages: the file's path, or stdin. */
  label: string;
  to: string;
  /** Keys that decrypt encrypted snapshots to check their content; they are stored encrypted all the same. */
  encryptionKeyFile?: string;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface ImportSummary {
  from: string;
  to: string;
  /** Snapshots the manifest lists. */
  objects: number;
  imported: number;
  /** Already in the store with the same name and size (and sha256 where both record one). */
  skipped: number;
  damaged: DamagedObject[];
  /** Encrypted snapshots imported checked as stored bytes only, for want of a key (tar-object-check.ts). */
  storedBytesOnly: string[];
  bytes: number;
  durationMs: number;
  bytesPerSecond: number;
}

/**
 * Stores the snapshots of a tar file that `exportBackups` wrote, as they stream in: the manifest first, then each
 * snapshot checked against it (name, size, recorded sha256) and by its own trailer before the store makes it
 * visible. A damaged snapshot is reported and not stored; the rest are. What the store already holds is skipped.
 * Encrypted snapshots are stored as they are; with keys, a missing or wrong key stops the import before it writes.
 */
export async function importBackups(options: ImportOptions): Promise<ImportSummary> {
  const extract = (await loadTarStream()).extract();
  try {
    return await importFrom(extract, options);
  } finally {
    extract.destroy(); // stops reading the input when an entry was refused; after the end, a no-op
  }
}

async function importFrom(extract: ReturnType<typeof tar.extract>, options: ImportOptions): Promise<ImportSummary> {
  const logger = options.logger ?? silentLogger;
  const started = Date.now();
  const guard = new TarHeaderGuard();
  const reading = pipeline(options.input, guard, extract, { signal: options.signal });
  reading.catch(() => undefined); // reported through the entries' iteration, or awaited below
  const entries = extract[Symbol.asyncIterator]();
  // What the tar parser throws means the file ends early or is no tar file; store errors are StewardErrors.
  const unreadable = (err: unknown) => {
    if (err instanceof StewardError || options.signal?.aborted) throw err;
    throw new IntegrityError(`${options.label} is truncated or not a tar file (${errorMessage(err)})`, { cause: err });
  };
  const nextEntry = () => entries.next().catch(unreadable);
  const first = await nextEntry();
  if (first.done || first.value.header.name !== MANIFEST_ENTRY) {
    throw new IntegrityError(
      `${options.label} does not begin with ${MANIFEST_ENTRY}: it is not a file etcd-copy-backups export wrote`,
    );
  }
  const manifest = parseManifest(await readSmall(first.value as AsyncIterable<Buffer>, options.label), options.label);
  const listed = new Map(manifest.objects.map((o) => [o.name, o]));
  const keys = options.encryptionKeyFile === undefined ? undefined : readKeyFile(options.encryptionKeyFile);
  for (const o of manifest.objects) {
    if (o.encryption && keys)
      checkEnvelopeHeader(Buffer.from(o.encryption.header, 'base64'), `${options.label}:${o.name}`, keys);
  }
  // Without keys: what is encrypted is stored as it is. The first object stored creates a folder not there yet.
  const to = await openStore(options.to, { allowMissingFolder: true });
  try {
    const held = new Map((await listSnapshots(to)).map((e) => [e.name, e]));
    const progress = new CopyProgress(
      logger,
      'import',
      manifest.objects.length,
      manifest.objects.reduce((n, o) => n + o.size, 0),
    );
    const damaged: DamagedObject[] = [];
    const storedBytesOnly: string[] = [];
    const seen = new Set<string>();
    let imported = 0;
    let skipped = 0;
    for (let next = await nextEntry(); !next.done; next = await nextEntry()) {
      const entry = next.value;
      if (entry.header.name.startsWith(DAMAGED_HEADER)) {
        // the guard replaced it: the object it stood for is reported, and the import goes on with the next
        const index = Number(entry.header.name.slice(DAMAGED_HEADER.length));
        const object = manifest.objects[index];
        await drain(entry as AsyncIterable<Buffer>).catch(unreadable);
        seen.add(object.name);
        const problem = { name: object.name, problem: `${options.label}:${object.name}: ${guard.problem(index)}` };
        damaged.push(problem);
        logger.error('not imported: the object is damaged', { object: object.name, problem: problem.problem });
        progress.objectDone();
        continue;
      }
      const name = entry.header.name.startsWith(OBJECTS_FOLDER) ? entry.header.name.slice(OBJECTS_FOLDER.length) : '';
      const object = listed.get(name);
      if (!object || seen.has(name)) {
        throw new IntegrityError(
          `${options.label}: entry "${entry.header.name}" is not in its manifest, or comes twice`,
        );
      }
      seen.add(name);
      if (entry.header.size !== object.size) {
        throw new IntegrityError(
          `${options.label}: ${name} has ${entry.header.size} bytes, but the manifest says ${object.size}`,
        );
      }
      const there = held.get(name);
      if (there?.size === object.size && (await alreadyHeld(to, there, object.metadata[METADATA_SHA256]))) {
        await drain(entry as AsyncIterable<Buffer>).catch(unreadable);
        skipped++;
      } else {
        const problem = await storeEntry(
          entry as AsyncIterable<Buffer>,
          object,
          to,
          `${options.label}:${name}`,
          progress,
          keys,
          options.signal,
        ).catch(unreadable);
        if (problem) {
          damaged.push(problem);
          logger.error('not imported: the object is damaged', { object: name, problem: problem.problem });
        } else {
          imported++;
          if (object.encryption && !keys) storedBytesOnly.push(name);
        }
      }
      progress.objectDone();
    }
    await reading.catch(unreadable);
    const missing = manifest.objects.filter((o) => !seen.has(o.name));
    if (missing.length > 0) {
      throw new IntegrityError(
        `${options.label} ends before ${missing.length} of the snapshots its manifest lists (the first: ${missing[0].name}); the file is truncated`,
      );
    }
    progress.report();
    return {
      from: options.label,
      to: to.location,
      objects: manifest.objects.length,
      imported,
      skipped,
      damaged,
      storedBytesOnly,
      bytes: progress.bytes,
      durationMs: Date.now() - started,
      bytesPerSecond: Math.round(progress.rate()),
    };
  } finally {
    await to.close?.();
  }
}

/**
 * Puts one tar entry into the store, checked. The entry is read to its end whatever happens, so that the tar
 * stream goes on to the next one: a damaged entry is drained and described, any other failure thrown after that.
 */
async function storeEntry(
  entry: AsyncIterable<Buffer>,
  object: ManifestObject,
  to: SnapStore,
  label: string,
  progress: CopyProgress,
  keys: KeyRing | undefined,
  signal?: AbortSignal,
): Promise<DamagedObject | undefined> {
  const check = tarObjectCheck(object, label, keys);
  const body = new VerifiedBody(check);
  // The put reports the body's failure; before the put reads it (a store may prepare first), nobody else listens.
  body.on('error', () => undefined);
  const metadata = object.encryption
    ? { ...object.metadata, [METADATA_ENCRYPTION_KEY_ID]: object.encryption.keyId }
    : object.metadata;
  const putting = to.put(object.name, body, { metadata, signal });
  const settled = putting.then(
    () => undefined,
    (err: unknown) => err ?? new Error('put failed'),
  );
  let failure: unknown;
  void settled.then((err) => {
    failure = err;
  });
  try {
    for await (const chunk of entry) {
      progress.addBytes(chunk.length);
      if (failure !== undefined || body.destroyed) continue;
      if (!body.write(chunk)) await Promise.race([once(body, 'drain').catch(() => undefined), settled]);
    }
  } catch (err) {
    body.destroy(err as Error); // the put fails and lands nothing
    await settled;
    throw err;
  }
  if (!body.destroyed) body.end();
  const err = await settled;
  if (err === undefined) return undefined;
  check.input.destroy(err as Error);
  const cause = await check.result.then(
    () => err,
    (checkErr: unknown) => checkErr,
  );
  if (!(cause instanceof IntegrityError)) throw cause;
  return { name: object.name, problem: cause.message };
}

/** The whole of a small entry (the manifest), refusing one larger than any manifest could be. */
async function readSmall(entry: AsyncIterable<Buffer>, label: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of entry) {
    size += chunk.length;
    if (size > MAX_MANIFEST_BYTES)
      throw new IntegrityError(`${label}: its manifest is larger than any manifest can be`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function drain(entry: AsyncIterable<Buffer>): Promise<void> {
  for await (const _ of entry);
}
