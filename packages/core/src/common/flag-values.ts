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
