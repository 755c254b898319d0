import type { Etcd3, IDuplexStream, ILeaseKeepAliveRequest, ILeaseKeepAliveResponse } from 'etcd3';
import type { Logger } from '../common/logger.js';

/**
 * Keeps every lease of a private etcd alive while deltas are replayed into it. A lease from the full snapshot
 * (say a Kubernetes master lease with a 15 s TTL) would otherwise expire mid-replay, and its revocation
 * deletes keys: a revision the source never had, and data lost (ebr#1045, ebr#1046). A keep-alive changes
 * no revision and nothing stored, so the result is unaffected.
 */
export class LeaseKeeper {
  private readonly ids = new Set<string>();
  private stream?: IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly client: Etcd3,
    private readonly logger: Logger,
    private readonly intervalMs = 500,
  ) {}

  /** Starts keeping alive every lease the etcd has now; later ones come through `add`. */
  async start(): Promise<void> {
    const { leases } = await this.client.leaseClient.leaseLeases();
    for (const lease of leases) this.ids.add(String(lease.ID));
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.intervalMs);
  }

  add(id: string): void {
    this.ids.add(id);
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  get size(): number {
    return this.ids.size;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    this.stream?.end();
    this.stream = undefined;
  }

  private async beat(): Promise<void> {
    if (this.stopped || this.ids.size === 0) return;
    try {
      if (!this.stream) {
        const stream = await this.client.leaseClient.leaseKeepAlive();
        stream.on('data', () => {}); // answers carry nothing we need, but must be read
        stream.on('error', (err) => {
          if (!this.stopped) this.logger.warn('lease keep-alive stream failed; reopening', { reason: err.message });
          if (this.stream === stream) this.stream = undefined;
        });
        this.stream = stream;
      }
      for (const ID of this.ids) this.stream.write({ ID });
    } catch (err) {
      this.stream = undefined;
      if (!this.stopped) this.logger.warn('lease keep-alive failed; retrying', { reason: (err as Error).message });
    }
  }
}
