import type { Etcd3 } from 'etcd3';
import { OperationError, errorMessage } from './errors.js';

export interface EtcdStatus {
  version: string;
  dbSize: number;
  leader: string;
  memberId: string;
  revision: number;
}

/**
 * Asks etcd for its status within `timeoutMs`: the first call every program makes, so that an
 * unreachable etcd is one clear error instead of a client retrying in silence.
 */
export async function etcdStatus(client: Etcd3, endpoints: string[], timeoutMs = 10_000): Promise<EtcdStatus> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000}s`)), timeoutMs);
  });
  try {
    const status = await Promise.race([client.maintenance.status(), timeout]);
    return {
      version: status.version,
      dbSize: Number(status.dbSize),
      leader: String(status.leader),
      memberId: String(status.header.member_id),
      revision: Number(status.header.revision),
    };
  } catch (err) {
    throw new OperationError(
      `cannot reach etcd at ${endpoints.join(',')}: ${errorMessage(err)}; check --endpoints (and --cacert/--cert/--key for TLS) and that etcd is running`,
      { cause: err },
    );
  } finally {
    clearTimeout(timer);
  }
}
