import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CatalogEntry, listSnapshots } from '../src/backup/snapshot-catalog.js';
import { IntegrityError } from '../src/common/errors.js';
import { copyObject } from '../src/copy/copy-object.js';
import { LocalStore } from '../src/store/local.js';
import type { SnapStore } from '../src/store/snapstore.js';
import { METADATA_SHA256 } from '../src/store/stored-digest.js';
import { type AzureTarget, startAzureTarget } from './store/azure-target.js';
import { type GcsTarget, startGcsTarget } from './store/gcs-target.js';
import { type S3Target, startS3Target } from './store/s3-target.js';

/**
 * A check that fails at the very end of an object (its trailer) must fail the upload after every part, block or
 * chunk was sent: the object must not appear, and nothing of the upload may stay pending.
 */
describe('copyObject into each cloud provider: a damaged object fails after its last part and lands nothing', () => {
  const NAME = 'v2/Full-00000000-00000010-1700000000';
  let dir: string;
  let sound: LocalStore;
  let damaged: LocalStore;
  let s3: S3Target;
  let gcs: GcsTarget;
  let azure: AzureTarget;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'copy-object-'));
    // What the copy checks of a full snapshot: whole 512-byte pages, then the sha256 of them (more than one part).
    const db = randomBytes(6 * 1024 * 1024);
    const snapshot = Buffer.concat([db, createHash('sha256').update(db).digest()]);
    const digest = createHash('sha256').update(snapshot).digest('hex');
    sound = new LocalStore(join(dir, 'sound'));
    await sound.put(NAME, Readable.from([snapshot]), { metadata: { [METADATA_SHA256]: digest } });
    // One bit flipped in the middle; the recorded sha256 left as it was, so only reading it all shows the damage.
    const flipped = Buffer.from(snapshot);
    flipped[flipped.length >> 1] ^= 0x01;
    damaged = new LocalStore(join(dir, 'damaged'));
    await damaged.put(NAME, Readable.from([flipped]), { metadata: { [METADATA_SHA256]: digest } });
    [s3, gcs, azure] = await Promise.all([startS3Target(), startGcsTarget(), startAzureTarget()]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([s3?.stop(), gcs?.stop(), azure?.stop()]);
    await rm(dir, { recursive: true, force: true });
  });

  const entryOf = async (store: SnapStore): Promise<CatalogEntry> => (await listSnapshots(store))[0];

  for (const provider of ['s3', 'gcs', 'azure'] as const) {
    it(provider, async () => {
      const target = { s3, gcs, azure }[provider];
      const store = await target.open('copy');
      try {
        const failure = await copyObject(damaged, store, await entryOf(damaged)).catch((err: unknown) => err);
        expect(failure).toBeInstanceOf(IntegrityError);
        expect((failure as Error).message).toMatch(/damaged: its content does not match its sha256 trailer/);
        expect(await store.stat(NAME)).toBeUndefined();
        if (provider === 's3') expect(s3.server.pendingUploads('backups')).toEqual([]);
        if (provider === 'gcs') expect(gcs.server.openSessions()).toBe(0);

        const checked = await copyObject(sound, store, await entryOf(sound));
        const copied = await store.stat(NAME);
        expect(copied?.size).toBe(checked.storedSize);
        expect(copied?.metadata[METADATA_SHA256]).toBe(checked.storedSha256);
        const bytes = Buffer.concat(await (await store.get(NAME)).toArray());
        expect(bytes.equals(await readFile(join(dir, 'sound', NAME)))).toBe(true);
      } finally {
        await store.close?.();
      }
    });
  }

  // Checked by its recorded sha256 alone (the copy's default), the same damage fails at the same point: the end.
  for (const provider of ['s3', 'gcs', 'azure'] as const) {
    it(`${provider}, checked by the recorded sha256 alone`, async () => {
      const target = { s3, gcs, azure }[provider];
      const store = await target.open('copy-stored');
      try {
        const failure = await copyObject(damaged, store, await entryOf(damaged), { check: 'stored' }).catch(
          (err: unknown) => err,
        );
        expect(failure).toBeInstanceOf(IntegrityError);
        expect((failure as Error).message).toMatch(/damaged: its bytes do not match the sha256 recorded/);
        expect(await store.stat(NAME)).toBeUndefined();
        if (provider === 's3') expect(s3.server.pendingUploads('backups')).toEqual([]);
        if (provider === 'gcs') expect(gcs.server.openSessions()).toBe(0);
      } finally {
        await store.close?.();
      }
    });
  }
});
