import type { DeltaEvent } from '@etcd-steward/core';

/** A put of a new key at `modRevision`, as a watch delivers it; its value is `valueSize` bytes of the revision. */
export const putEvent = (modRevision: number, key = `k${modRevision}`, valueSize = 300): DeltaEvent => ({
  type: 'put',
  key: Buffer.from(key),
  value: Buffer.alloc(valueSize, modRevision),
  createRevision: modRevision,
  modRevision,
  version: 1,
  lease: '0',
  time: '2026-11-22T02:00:00.000Z',
});
