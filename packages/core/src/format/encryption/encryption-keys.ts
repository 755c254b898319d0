import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { errorMessage, UsageError } from '../../common/errors.js';

/** A key-encryption key: 32 bytes for AES-256, known by an id that each object records (docs/encryption.md §2). */
export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/**
 * The keys of `--encryption-key-file`: the first encrypts, every one decrypts, so that a new key can go first
 * while objects written under the old ones stay readable (docs/encryption.md §4).
 */
export interface KeyRing {
  /** The key file, for messages; never the keys. */
  readonly source: string;
  readonly current: EncryptionKey;
  byId(id: string): EncryptionKey | undefined;
}

export const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Parses a key file: one key a line, `<id> <key>`, the key as 64 hex digits or 44 characters of base64; blank
 * lines and lines starting with `#` are skipped. Errors name the line, never its key.
 */
export function parseKeyFile(text: string, source: string): KeyRing {
  const keys: EncryptionKey[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const where = `${source} line ${index + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 2) throw new UsageError(`${where}: write "<key id> <key>", a key a line`);
    const [id, text] = fields;
    if (!KEY_ID.test(id)) throw new UsageError(`${where}: a key id is 1-64 of A-Z a-z 0-9 . _ -`);
    const key = decodeKey(text);
    if (!key) {
      throw new UsageError(`${where}: key "${id}" is not 32 bytes as 64 hex digits or base64 (openssl rand -hex 32)`);
    }
    if (keys.some((k) => k.id === id)) throw new UsageError(`${where}: key id "${id}" is given twice`);
    keys.push({ id, key });
  }
  if (keys.length === 0) throw new UsageError(`${source} holds no key: add a line "<key id> <key>"`);
  const byId = new Map(keys.map((k) => [k.id, k]));
  return { source, current: keys[0], byId: (id) => byId.get(id) };
}

/**
 * Reads and parses `--encryption-key-file`; a UsageError (exit 2) when it cannot be read, is malformed, or others
 * may read it or group or others may change it: whoever can read the file can read every backup. Reading by the
 * group is allowed because Kubernetes makes a Secret's files group-readable (0440) in every pod that sets
 * `fsGroup`, the group being that pod's own.
 */
/** Any permission for others, and write permission for the group. */
const OPEN_MODE_BITS = 0o027;

export function readKeyFile(path: string): KeyRing {
  let text: string;
  let mode: number;
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    mode = fstatSync(fd).mode & 0o777;
    text = readFileSync(fd, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the encryption key file ${path}: ${errorMessage(err)}`);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (mode & OPEN_MODE_BITS) {
    throw new UsageError(
      `the encryption key file ${path} has mode 0${mode.toString(8)}: others may read it or group or others may change it; make it its owner's alone: chmod 600 ${path}`,
    );
  }
  return parseKeyFile(text, path);
}

function decodeKey(text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/]{43}=$/.test(text)) return Buffer.from(text, 'base64');
  return undefined;
}
