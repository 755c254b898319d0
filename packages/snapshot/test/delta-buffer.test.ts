import type { DeltaEvent } from '@etcd-steward/core';
import { DeltaBuffer } from '@etcd-steward/snapshot';
import { expect, it } from 'vitest';

const event = (modRevision: number): DeltaEvent => ({
  type: 'put',
  key: Buffer.from(`k${modRevision}`),
  value: Buffer.alloc(300),
  createRevision: modRevision,
  modRevision,
  version: 1,
  lease: '0',
  time: new Date().toISOString(),
});

it('holds only what the chain does not cover yet, sized as delta JSON', () => {
  const buffer = new DeltaBuffer();
  buffer.add([event(4), event(5), event(6), event(6)], 4);
  expect(buffer.count).toBe(3);
  expect(buffer.lastRevision).toBe(6);
  expect(buffer.bytes).toBeGreaterThan(3 * 400); // base64 grows 300 bytes to 400
  buffer.dropThrough(5);
  expect(buffer.count).toBe(2);
  const bytes = buffer.bytes;
  expect(buffer.take().map((e) => e.modRevision)).toEqual([6, 6]);
  expect(bytes).toBeGreaterThan(0);
  expect(buffer.empty).toBe(true);
  expect(buffer.bytes).toBe(0);
  expect(buffer.lastRevision).toBe(0);
});
