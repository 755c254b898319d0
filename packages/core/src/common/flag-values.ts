import { UsageError } from './errors.js';

const TRUE = /^(true|1|yes|on)$/i;
const FALSE = /^(false|0|no|off)$/i;

/** A yes/no setting in any of the spellings people write; anything else is refused, never taken as false. */
export function parseBoolean(value: string | number | boolean, what: string): boolean {
  if (typeof value === 'boolean') return value;
  const text = String(value).trim();
  if (TRUE.test(text)) return true;
  if (FALSE.test(text)) return false;
  throw new UsageError(`${what} is not true or false: write true/false, 1/0, yes/no or on/off`);
}

/** A number setting; `what` names where it was given (flag, variable or config file). */
export function parseNumber(value: string | number | boolean, what: string): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() ? Number(value) : Number.NaN;
  if (!Number.isFinite(n)) throw new UsageError(`${what} is not a number: write digits, e.g. 8080`);
  return n;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A Go-style duration, as ebr's flags take them ("20s", "1m30s", "500ms", "0"), in milliseconds; also in days
 * ("7d"), which Go lacks but retention periods want.
 */
export function parseDuration(value: string | number, flag: string): number {
  const text = String(value).trim();
  if (text === '0') return 0;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) {
    throw new UsageError(`--${flag} "${text}" is not a duration: write e.g. 20s, 1m30s, 500ms or 7d`);
  }
  return Math.round(parts.reduce((ms, [, n, unit]) => ms + Number(n) * DURATION_UNITS[unit], 0));
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  ki: 1024,
  kib: 1024,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
};

/** A byte count: a plain number as ebr takes it, or with a unit ("10Mi", "1GiB", "500MB"). */
export function parseByteSize(value: string | number, flag: string): number {
  const match = /^(\d+)\s*([a-z]*)$/i.exec(String(value).trim());
  const unit = match ? SIZE_UNITS[match[2].toLowerCase()] : undefined;
  if (!match || unit === undefined || !Number.isSafeInteger(Number(match[1]) * unit)) {
    throw new UsageError(`--${flag} "${value}" is not a size in bytes: write e.g. 10485760, 10Mi or 1Gi`);
  }
  return Number(match[1]) * unit;
}

/** A duration, size or count that must not be 0 (or less). */
export function requirePositive(value: number, flag: string): number {
  if (value <= 0) throw new UsageError(`--${flag} must be more than 0`);
  return value;
}
