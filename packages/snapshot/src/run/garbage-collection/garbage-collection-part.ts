import { ebrRetentionOptions, type RetentionArgs, retentionPolicy } from '@etcd-steward/core/cli';
import { parseDuration } from '@etcd-steward/core/common';
import type { SidecarPart } from '../sidecar-part.js';

export interface GarbageCollectionArgs extends RetentionArgs {
  'garbage-collection-period': string;
}

/** etcd-gc's retention, run by the leader's sidecar every period (ebr's garbage collector; docs/gc.md). */
export const garbageCollectionPart: SidecarPart<GarbageCollectionArgs> = {
  name: 'garbage-collection',
  heading: 'Garbage collection',
  options: (y) =>
    ebrRetentionOptions(y, { policyDefault: 'Exponential' }).option('garbage-collection-period', {
      type: 'string',
      default: '0',
      describe:
        "Delete the snapshots the policy no longer keeps this often, on the leader's sidecar (as etcd-gc does; docs/gc.md); 1s or less: never (ebr's default is 1m; here it is off unless asked for)",
    }),

  /** ebr takes a period of 1s or less as "no garbage collection". */
  configure(args, base) {
    const periodMs = parseDuration(args['garbage-collection-period'], 'garbage-collection-period');
    if (periodMs <= 1_000) return undefined;
    const policy = retentionPolicy(args, { chunkMaxAgeMs: base.incompleteUploadMaxAgeMs });
    return async (assembly, context) => [
      new (await import('./garbage-collector.js')).GarbageCollectorComponent(
        {
          store: assembly.store,
          leadership: assembly.leadership,
          periodMs,
          policy,
          incompleteUploadMaxAgeMs: base.incompleteUploadMaxAgeMs,
        },
        context,
      ),
    ];
  },
};
