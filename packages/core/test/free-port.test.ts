// One etcd version: ports on this machine, no etcd.
import { freePort } from '@etcd-steward/core';
import { describe, expect, it } from 'vitest';

describe('freePort', () => {
  it('never hands out a port twice while it may still be waiting for its server', async () => {
    // 300 draws from ~22,000 ports would repeat one more often than not, were each draw on its own.
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    expect(ports.every((p) => p >= 10_000)).toBe(true);
  });
});
