import type { IncomingMessage } from 'node:http';
import type { SavedFullSnapshot } from '@etcd-steward/core/backup';
import type { SnapshotRef } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import { RETRY_AFTER, type Route, type RouteResponse } from '../component.js';
import { ebrLatest, ebrSnapshot } from './ebr-json.js';
import { LatestListing } from './latest-listing.js';
import type { SnapshotMetrics } from './snapshot-metrics.js';

/** What the routes use of the snapshotter (snapshotter-component.ts), which builds them. */
export interface SnapshotTriggers {
  /** Leads, but has not started taking snapshots yet. */
  readonly starting: boolean;
  readonly metrics: SnapshotMetrics;
  /** Both throw NotLeaderError on a follower, whose API passes the request on to the leader's sidecar. */
  full(final: boolean): Promise<SavedFullSnapshot>;
  delta(): Promise<SnapshotRef | undefined>;
}

const STARTING =
  'this sidecar leads but has not started taking snapshots yet (hand-over or start-up); try again shortly';

/** ebr's handlers ignore the method, and etcd-wrapper calls them with GET: both work. */
const TRIGGER = ['GET', 'POST'] as const;

/**
 * The least time between two final full snapshots taken on request. A final snapshot says its etcd has stopped
 * (`etcd-copy-backups --wait-for-final-snapshot` waits for one), so a second one soon after adds nothing; requests
 * that come while one is taken share it.
 */
export const FINAL_INTERVAL_MS = 30_000;

/**
 * ebr's snapshot endpoints, with its JSON shapes: POST|GET /snapshot/full[?final=true], POST|GET
 * /snapshot/delta, GET /snapshot/latest. A follower passes triggers on to the leader's sidecar; any sidecar
 * answers /snapshot/latest itself, since all read the same store, from a listing a few seconds old at most.
 */
export function snapshotRoutes(snapshotter: SnapshotTriggers, store: SnapStore, storePrefix: string): Route[] {
  const listing = new LatestListing(store);
  // What this sidecar has stored, as its metrics say: a listing older than its newest snapshot is not served.
  const stored = async () =>
    JSON.stringify(
      await Promise.all([snapshotter.metrics.latestRevision.get(), snapshotter.metrics.latestTimestamp.get()]).then(
        (gauges) => gauges.map((gauge) => gauge.values),
      ),
    );
  let lastFinalAt = Number.NEGATIVE_INFINITY;
  // A follower's trigger throws NotLeaderError (snapshotter.full/delta), which the API passes on to the leader.
  const onLeader =
    (act: (query: URLSearchParams) => Promise<RouteResponse>) =>
    async (_request: IncomingMessage, query: URLSearchParams): Promise<RouteResponse> => {
      if (snapshotter.starting) return { status: 503, body: { error: STARTING }, headers: RETRY_AFTER };
      return act(query);
    };
  return [
    {
      path: '/snapshot/full',
      methods: TRIGGER,
      query: ['final'],
      forwardable: true,
      handle: onLeader(async (query) => {
        const final = parseGoBool(query.get('final'));
        if (final === undefined) return { status: 400, body: { error: 'final must be true or false' } };
        const waitMs = final ? lastFinalAt + FINAL_INTERVAL_MS - Date.now() : 0;
        if (waitMs > 0) {
          const seconds = Math.ceil(waitMs / 1000);
          return {
            status: 429,
            body: {
              error: `a final full snapshot was taken less than ${FINAL_INTERVAL_MS / 1000} s ago; ask again in ${seconds} s`,
            },
            headers: { 'retry-after': String(seconds) },
          };
        }
        const saved = await snapshotter.full(final);
        if (final) lastFinalAt = Date.now();
        return { status: 200, body: ebrSnapshot(saved.ref, storePrefix) };
      }),
    },
    {
      path: '/snapshot/delta',
      methods: TRIGGER,
      forwardable: true,
      handle: onLeader(async () => {
        const ref = await snapshotter.delta();
        return { status: 200, body: ref ? ebrSnapshot(ref, storePrefix) : null };
      }),
    },
    {
      path: '/snapshot/latest',
      methods: ['GET'],
      open: true,
      handle: async () => ({ status: 200, body: ebrLatest(await listing.entries(await stored()), storePrefix) }),
    },
  ];
}

/** Go's strconv.ParseBool, which ebr uses for `final`; absent means false. */
function parseGoBool(value: string | null): boolean | undefined {
  if (value === null || value === '') return false;
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}
