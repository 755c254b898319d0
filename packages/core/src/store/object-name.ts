import { UsageError } from '../errors.js';

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
