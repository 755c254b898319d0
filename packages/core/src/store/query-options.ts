import { UsageError } from '../common/errors.js';
import { parseBoolean } from '../common/flag-values.js';
import { redact, type StoreLocation } from './store-url.js';

// Store configs (s3, azure) read their yes/no settings with the same rules as flags.
export { parseBoolean };

/**
 * Typed access to a store URL's query parameters (`s3://bucket/prefix?region=eu-west-1&partSize=16MiB`).
 * Unknown names are refused, so that a typo is reported instead of silently ignored.
 */
export class QueryOptions {
  private readonly params: URLSearchParams;
  private readonly where: string;

  constructor(location: StoreLocation) {
    this.params = location.url.searchParams;
    this.where = `--store ${redact(location.url)}`;
  }

  /** Refuses names outside `known`, listing the known ones. */
  allowOnly(known: readonly string[]): this {
    const unknown = [...this.params.keys()].filter((k) => !known.includes(k));
    if (unknown.length > 0) {
      throw new UsageError(
        `${this.where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ${known.length ? `known: ${known.join(', ')}` : 'this kind of store takes none'}`,
      );
    }
    return this;
  }

  string(name: string): string | undefined {
    const value = this.params.get(name);
    return value === null || value === '' ? undefined : value;
  }

  boolean(name: string): boolean | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    return parseBoolean(value, `${this.where}: option ${name}=${value}`);
  }

  /** A count, e.g. partsInFlight=4. */
  integer(name: string, min: number, max: number): number | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new UsageError(`${this.where}: option ${name}=${value} must be a whole number from ${min} to ${max}`);
    }
    return n;
  }

  /** A size in bytes, with an optional KiB/MiB/GiB suffix, e.g. partSize=8MiB. */
  size(name: string): number | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const match = /^(\d+)\s*(B|KiB|MiB|GiB)?$/i.exec(value);
    if (!match)
      throw new UsageError(`${this.where}: option ${name}=${value} is not a size; write e.g. 8MiB or 8388608`);
    const unit = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }[(match[2] ?? 'b').toLowerCase() as 'b'];
    return Number(match[1]) * unit;
  }

  /** A duration in milliseconds, with an optional ms/s/m suffix (seconds when none), e.g. timeout=30s. */
  duration(name: string): number | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m)?$/.exec(value);
    if (!match)
      throw new UsageError(`${this.where}: option ${name}=${value} is not a duration; write e.g. 30s or 500ms`);
    const unit = { ms: 1, s: 1000, m: 60_000 }[(match[2] ?? 's') as 'ms'];
    return Math.round(Number(match[1]) * unit);
  }

  oneOf<T extends string>(name: string, choices: readonly T[]): T | undefined {
    const value = this.string(name);
    if (value === undefined) return undefined;
    const found = choices.find((c) => c.toLowerCase() === value.toLowerCase());
    if (!found) throw new UsageError(`${this.where}: option ${name}=${value} must be one of ${choices.join(', ')}`);
    return found;
  }
}
