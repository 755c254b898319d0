import type { IncomingMessage } from 'node:http';
import { listSnapshots } from '@etcd-steward/core/backup';
import type { SnapStore } from '@etcd-steward/core/store';
import type { Route, RouteResponse } from './components.js';
import { ebrLatest, ebrSnapshot } from './ebr-json.js';
import { type LeaderForward, RETRY_AFTER } from './leader-forward.js';
import type { SnapshotterComponent } from './snapshotter-component.js';

const STARTING =
  'this sidecar leads but has not started taking snapshots yet (hand-over or start-up); try again shortly';

/** ebr's handlers ignore the method, and etcd-wrapper calls them with GET: both work. */
const TRIGGER = ['GET', 'POST'] as const;

/**
 * ebr's snapshot endpoints, with its JSON shapes: POST|GET /snapshot/full[?final=true], POST|GET
 * /snapshot/delta, GET /snapshot/latest. A follower passes triggers on to the leader's sidecar; any sidecar
 * answers /snapshot/latest itself, since all read the same store.
 */
export function snapshotRoutes(
  snapshotter: SnapshotterComponent,
  forward: LeaderForward,
  store: SnapStore,
  storePrefix: string,
): Route[] {
  const onLeader =
    (path: string, act: (query: URLSearchParams) => Promise<RouteResponse>) =>
    async (request: IncomingMessage, query: URLSearchParams): Promise<RouteResponse> => {
      if (snapshotter.leading) return act(query);
      if (snapshotter.starting) return { status: 503, body: { error: STARTING }, headers: RETRY_AFTER };
      return forward.forward(request, `${path}${query.size ? `?${query}` : ''}`);
    };
  return [
    {
      path: '/snapshot/full',
      methods: TRIGGER,
      query: ['final'],
      acts: true,
      handle: onLeader('/snapshot/full', async (query) => {
        const final = parseGoBool(query.get('final'));
        if (final === undefined) return { status: 400, body: { error: 'final must be true or false' } };
        const saved = await snapshotter.full(final);
        return { status: 200, body: ebrSnapshot(saved.ref, storePrefix) };
      }),
    },
    {
      path: '/snapshot/delta',
      methods: TRIGGER,
      acts: true,
      handle: onLeader('/snapshot/delta', async () => {
        const ref = await snapshotter.delta();
        return { status: 200, body: ref ? ebrSnapshot(ref, storePrefix) : null };
      }),
    },
    {
      path: '/snapshot/latest',
      methods: ['GET'],
      handle: async () => ({ status: 200, body: ebrLatest(await listSnapshots(store), storePrefix) }),
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
