import { describe, expect, it } from 'vitest';
import { writeMessage } from '../src/common/protobuf-wire.js';
import { entryRevisions } from '../src/wal/entry-revisions.js';

/**
 * The revisions a WAL entry's request creates when etcd replays it (docs/etcd-formats.md §6.1), on entries laid
 * out as etcd 3.4 writes them: the bound etcd-validate puts on the revision etcd will serve after a crash.
 */
describe('entryRevisions', () => {
  /** raftpb.Entry (proto2: every scalar written) of type `type` holding `data`. */
  const entry = (data: Buffer | undefined, type = 0) =>
    Buffer.concat([
      Buffer.from([0x08, type, 0x10, 0x02, 0x18, 0x07]),
      ...(data ? [Buffer.from([0x22, data.length]), data] : []),
    ]);
  const header = writeMessage([[1, 42]]);
  /** InternalRaftRequest with one request field and the header etcd fills in. */
  const request = (field: number, body: Buffer) =>
    writeMessage([
      [field, body],
      [100, header],
    ]);
  const put = (extra: Array<[number, number]> = []) =>
    writeMessage([[1, Buffer.from('foo')], [2, Buffer.from('bar')], ...extra]);
  const txn = (ops: Buffer[], compare = false) =>
    writeMessage([
      ...(compare ? ([[1, writeMessage([[3, Buffer.from('foo')]])]] as Array<[number, Buffer]>) : []),
      ...ops.map((op) => [2, op] as [number, Buffer]),
    ]);

  it('a plain put creates one revision for certain', () => {
    expect(entryRevisions(entry(request(4, put())))).toBe('one');
  });

  it('a put with a lease or an ignore flag, a delete, a lease revoke, a txn with compares: at most one', () => {
    expect(entryRevisions(entry(request(4, put([[3, 7]]))))).toBe('maybe');
    expect(entryRevisions(entry(request(4, put([[5, 1]]))))).toBe('maybe');
    expect(entryRevisions(entry(request(5, writeMessage([[1, Buffer.from('foo')]]))))).toBe('maybe');
    expect(entryRevisions(entry(request(9, writeMessage([[1, 7]]))))).toBe('maybe');
    expect(entryRevisions(entry(request(6, txn([writeMessage([[2, put()]])], true))))).toBe('maybe');
    const deleteOp = writeMessage([[3, writeMessage([[1, Buffer.from('foo')]])]]);
    expect(entryRevisions(entry(request(6, txn([writeMessage([[2, put()]]), deleteOp]))))).toBe('maybe');
  });

  it('a txn without compares whose ops are all plain puts creates one for certain', () => {
    const op = writeMessage([[2, put()]]);
    expect(entryRevisions(entry(request(6, txn([op, op]))))).toBe('one');
  });

  it('conf changes, empty entries, compactions, lease grants and v2 requests create none', () => {
    expect(entryRevisions(entry(Buffer.from([0x08, 0x01]), 1))).toBe('none');
    expect(entryRevisions(entry(undefined))).toBe('none');
    expect(entryRevisions(entry(request(7, writeMessage([[1, 3]]))))).toBe('none');
    expect(entryRevisions(entry(request(8, writeMessage([[1, 10]]))))).toBe('none');
    // a raw v2 Request, as etcd 3.4 proposes its member attributes: ID = 1, Method = 2, Path = 3
    const v2 = Buffer.concat([
      writeMessage([[1, 5]]),
      writeMessage([[2, Buffer.from('PUT')]]),
      writeMessage([[3, Buffer.from('/0/members/1/attributes')]]),
    ]);
    expect(entryRevisions(entry(v2))).toBe('none');
  });
});
