import { describe, expect, it } from 'vitest';
import { Backoff } from '../src/common/backoff.js';

const SAMPLES = 500;

/** The largest of many waits drawn at the same point of a backoff: how long it may wait there. */
function longest(draw: () => number): { max: number; distinct: number } {
  const waits = Array.from({ length: SAMPLES }, draw);
  return { max: Math.max(...waits), distinct: new Set(waits).size };
}

describe('Backoff', () => {
  it('waits at random below a bound that doubles after each failure, up to the cap, and starts over after a success', () => {
    const policy = { baseDelayMs: 1_000, maxDelayMs: 30_000 };
    const bounds = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000];
    bounds.forEach((bound, failures) => {
      const { max, distinct } = longest(() => {
        const backoff = new Backoff(policy);
        for (let i = 0; i < failures; i++) backoff.next();
        return backoff.next();
      });
      expect(max).toBeLessThanOrEqual(bound);
      expect(max).toBeGreaterThan(bound * 0.9);
      expect(distinct).toBeGreaterThan(SAMPLES / 2);
    });
    const backoff = new Backoff(policy);
    for (let i = 0; i < 40; i++) expect(backoff.next()).toBeLessThanOrEqual(30_000);
    backoff.reset();
    expect(backoff.next()).toBeLessThanOrEqual(1_000);
  });

  it('stops waiting as soon as it is aborted', async () => {
    // a bound of ~23 days: a wait shorter than the 20 ms before the abort comes once in 10^8
    const backoff = new Backoff({ baseDelayMs: 2_000_000_000, maxDelayMs: 2_000_000_000 });
    const control = new AbortController();
    const started = Date.now();
    setTimeout(() => control.abort(), 20);
    await expect(backoff.wait(control.signal)).rejects.toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
