import { UsageError } from '../common/errors.js';

/**
 * Which keys a look at the store's history is about: one key (`--key`), the keys under a prefix (`--prefix`, as
 * `etcdctl get --prefix` takes it), or every key. Keys are bytes; a flag's text is taken as UTF-8.
 */
export interface KeyFilter {
  key?: Buffer;
  prefix?: Buffer;
}

/** The filter `--key` and `--prefix` ask for; both at once is a usage error (exit 2). */
export function keyFilter(options: { key?: string; prefix?: string }): KeyFilter {
  if (options.key !== undefined && options.prefix !== undefined) {
    throw new UsageError('--key and --prefix both choose the keys: give one (--prefix "" for every key)');
  }
  if (options.key === '') throw new UsageError('--key is empty: name a key, or give --prefix for the keys under one');
  if (options.key !== undefined) return { key: Buffer.from(options.key, 'utf8') };
  if (options.prefix !== undefined && options.prefix !== '') return { prefix: Buffer.from(options.prefix, 'utf8') };
  return {};
}

/** Whether `key` is one the filter asks about. */
export function keyMatches(filter: KeyFilter, key: Buffer): boolean {
  if (filter.key) return key.equals(filter.key);
  if (filter.prefix)
    return key.length >= filter.prefix.length && filter.prefix.equals(key.subarray(0, filter.prefix.length));
  return true;
}

/** The filter in words, for a summary line: `key /a`, `keys under /registry/`, `every key`. */
export function describeFilter(filter: KeyFilter): string {
  if (filter.key) return `key ${printableKey(filter.key)}`;
  if (filter.prefix) return `keys under ${printableKey(filter.prefix)}`;
  return 'every key';
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** A key as text when it is UTF-8 (every Kubernetes key is), undefined for other bytes. */
export function keyText(key: Buffer): string | undefined {
  try {
    return decoder.decode(key);
  } catch {
    return undefined;
  }
}

/**
 * A key as a person reads it on one line: its text when it is UTF-8 without control characters, otherwise quoted
 * with escapes (JSON's, `\u00XX` for bytes that are not UTF-8), so that no key can break a table's line.
 */
export function printableKey(key: Buffer): string {
  const text = keyText(key);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is looked for
  if (text !== undefined && !/[\u0000-\u001f\u007f]/.test(text)) return text;
  return JSON.stringify(text ?? key.toString('latin1'));
}
