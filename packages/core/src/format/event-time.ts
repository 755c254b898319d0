/**
 * Times in RFC 3339 with up to nanoseconds, as ebr records them for delta events ("2026-11-21T22:15:58.86390712Z"),
 * as nanoseconds since the epoch: a JS Date keeps only milliseconds, and two events of one millisecond must
 * still compare the way they happened.
 */
const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/** Nanoseconds since the epoch, or undefined when `text` is not RFC 3339. */
export function parseRfc3339Nanos(text: string): bigint | undefined {
  const m = RFC3339.exec(text.trim());
  if (!m) return undefined;
  const zone = m[4].toUpperCase();
  const ms = Date.parse(`${m[1]}T${m[2]}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt((m[3] ?? '').padEnd(9, '0') || '0');
}

/** Nanoseconds since the epoch as RFC 3339 in UTC with all nine digits: the time exactly as it is compared. */
export function formatRfc3339Nanos(nanos: bigint): string {
  const seconds = nanos / 1_000_000_000n - (nanos % 1_000_000_000n < 0n ? 1n : 0n);
  const fraction = nanos - seconds * 1_000_000_000n;
  const whole = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  return `${whole}.${String(fraction).padStart(9, '0')}Z`;
}
