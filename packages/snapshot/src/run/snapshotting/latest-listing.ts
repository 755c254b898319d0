import { type CatalogEntry, listSnapshots } from '@etcd-steward/core/backup';
import type { SnapStore } from '@etcd-steward/core/store';
import { SingleFlight } from './single-flight.js';

/** How long one listing of the store answers /snapshot/latest. */
export const LISTING_TTL_MS = 5_000;

/**
 * The store's snapshots for /snapshot/latest, which anyone may ask: one listing answers every request for a few
 * seconds, and requests that come while it runs share it, so that a flood of requests costs the store (and its
 * bill) a listing every few seconds, not one each. A listing from before this sidecar stored a snapshot is never
 * served: `stored` changes with each one, so the sidecar's own snapshots show at once.
 */
export class LatestListing {
  private cached?: { at: number; stored: string; entries: CatalogEntry[] };
  private readonly listing = new SingleFlight<string, CatalogEntry[]>();

  constructor(
    private readonly store: SnapStore,
    private readonly ttlMs = LISTING_TTL_MS,
  ) {}

  async entries(stored: string): Promise<readonly CatalogEntry[]> {
    const cached = this.cached;
    if (cached && cached.stored === stored && Date.now() - cached.at < this.ttlMs) return cached.entries;
    return this.listing.run(stored, async () => {
      const at = Date.now();
      const entries = await listSnapshots(this.store);
      this.cached = { at, stored, entries };
      return entries;
    });
  }
}
