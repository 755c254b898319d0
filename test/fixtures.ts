import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A real store written by etcd-backup-restore v0.23.0: what it holds and how it was made, in its README.md. */
export const ebrStoreDir = fileURLToPath(new URL('./fixtures/ebr-v0.23-store', import.meta.url));

/** The path of one of that store's objects, e.g. `Full-00000000-00000007-1795299379`. */
export const ebrStoreObject = (name: string): string => join(ebrStoreDir, 'v2', name);
