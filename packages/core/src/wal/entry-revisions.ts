import { ProtoCursor } from '../common/protobuf-wire.js';

/**
 * How many store revisions applying a raft entry creates (docs/etcd-formats.md §6.1): `none`, `one` for certain,
 * or `maybe` one. etcd applies each request in one mvcc write transaction, so no entry creates more than one.
 * - `one`: a put with no lease and no `ignore_*` flag, or a txn without compares whose success ops are all such
 *   puts: etcd applies them whatever the keyspace holds (it refuses them only under a NOSPACE alarm or when an
 *   auth change came between proposal and apply).
 * - `maybe`: any other put, a delete range or txn (they change nothing when no key matches, or a compare fails
 *   into an empty branch), a lease revoke (it deletes the lease's keys, if any).
 * - `none`: conf changes, the leader's empty entry, v2 requests (raw, or in the `v2` field), compactions, lease
 *   grants, alarms, auth and membership requests.
 */
export type EntryRevisions = 'none' | 'one' | 'maybe';

/** raftpb.Entry: type = 1 (0 normal), data = 4. InternalRaftRequest: v2 = 2, put = 4, delete_range = 5, txn = 6, lease_revoke = 9. */
export function entryRevisions(entry: Buffer): EntryRevisions {
  let type = 0;
  let data: Buffer | undefined;
  for (const cursor = new ProtoCursor(entry); cursor.next(); ) {
    if (cursor.field === 1 && cursor.wire === 0) type = cursor.value;
    else if (cursor.field === 4 && cursor.wire === 2) data = cursor.bytes();
  }
  if (type !== 0 || !data || data.length === 0) return 'none';
  let found: EntryRevisions = 'none';
  try {
    for (const cursor = new ProtoCursor(data); cursor.next(); ) {
      // A raw v2 Request (what etcd applies when the data is no InternalRaftRequest) always has its method as field 2.
      if (cursor.field === 2) return 'none';
      if (cursor.wire !== 2) continue;
      if (cursor.field === 4) found = plainPut(cursor.embedded()) ? 'one' : 'maybe';
      else if (cursor.field === 6) found = blindPutTxn(cursor.embedded()) ? 'one' : 'maybe';
      else if (cursor.field === 5 || cursor.field === 9) found = 'maybe';
    }
  } catch {
    return 'none'; // not an InternalRaftRequest: etcd applies it to the v2 store only
  }
  return found;
}

/** PutRequest without lease (3), ignore_value (5) or ignore_lease (6). */
function plainPut(put: ProtoCursor): boolean {
  while (put.next()) {
    if ((put.field === 3 || put.field === 5 || put.field === 6) && put.value !== 0) return false;
  }
  return true;
}

/** TxnRequest without compares (1) whose success ops (2) are all plain puts (RequestOp.request_put = 2). */
function blindPutTxn(txn: ProtoCursor): boolean {
  let puts = 0;
  while (txn.next()) {
    if (txn.field === 1) return false;
    if (txn.field !== 2 || txn.wire !== 2) continue;
    const op = txn.embedded();
    while (op.next()) {
      if (op.field !== 2 || op.wire !== 2 || !plainPut(op.embedded())) return false;
      puts++;
    }
  }
  return puts > 0;
}
