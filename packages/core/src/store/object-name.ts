import { UsageError } from '../common/errors.js';

/**
 * Top-level folders the local store keeps its own files in (object metadata, writes in flight). Reserved in
 * every provider, so that a store copied between providers means the same everywhere.
 */
export const RESERVED_FOLDERS: readonly string[] = ['.metadata', '.tmp'];

/** Object names come from listings of untrusted stores too: refuse anything that could escape the prefix. */
export function checkObjectName(name: string): void {
  const parts = name.split('/');
  if (
    name.length === 0 ||
    name.length > 1024 ||
    parts.some((p) => p === '' || p === '.' || p === '..') ||
    name.includes('\0')
  ) {
    throw new UsageError(`invalid object name "${name}": names are relative paths without empty, "." or ".." parts`);
  }
  if (RESERVED_FOLDERS.includes(parts[0])) {
    throw new UsageError(
      `invalid object name "${name}": ${RESERVED_FOLDERS.map((f) => `${f}/`).join(' and ')} are reserved for the store's own files; choose another name`,
    );
  }
}

/** Where an object lives in a bucket: the store prefix, if any, then the name. */
export function objectKey(prefix: string, name: string): string {
  return prefix ? `${prefix}/${name}` : name;
}

/** What a listing under `prefix` looks for: keys that start with this. The `/` keeps prefix `a` out of `ab/`. */
export function listingPrefix(storePrefix: string, prefix: string): string {
  return storePrefix ? `${storePrefix}/${prefix}` : prefix;
}

/** The object name of a listed key, or undefined for keys a store must not hand out. */
export function nameOfKey(storePrefix: string, key: string): string | undefined {
  const name = storePrefix ? key.slice(storePrefix.length + 1) : key;
  try {
    checkObjectName(name);
    return name;
  } catch {
    return undefined;
  }
}
