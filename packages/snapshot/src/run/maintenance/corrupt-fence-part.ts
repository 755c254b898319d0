import type { SidecarPart } from '../sidecar-part.js';

export interface CorruptFenceArgs {
  'corrupt-fence': boolean;
}

/** No snapshots from a member with a CORRUPT alarm (corrupt-fence.ts). */
export const corruptFencePart: SidecarPart<CorruptFenceArgs> = {
  name: 'corrupt-fence',
  heading: 'Alarms',
  options: (y) =>
    y.option('corrupt-fence', {
      type: 'boolean',
      default: true,
      describe:
        'Take no snapshots from a member with a CORRUPT alarm, and fail /healthz while it lasts; read every --reelection-period (--no-corrupt-fence: snapshot it anyway)',
    }),

  configure(args, base) {
    if (!args['corrupt-fence']) return undefined;
    return async (assembly, context) => [
      new (await import('./corrupt-fence.js')).CorruptFence(
        { connection: base.connection, leadership: assembly.leadership, periodMs: base.reelectionPeriodMs },
        context,
      ),
    ];
  },
};
