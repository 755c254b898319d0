import type { SnapshotChain } from '../backup/snapshot-chain.js';
import { olderVersion, type RecoveredObject, recoveredBy, withVersionNote } from '../backup/stored-versions.js';
import type { Logger } from '../common/logger.js';
import type { UnusableFullSnapshotError } from '../replay/chain-source.js';

/**
 * What a restore read from versions other than the current ones (stored-versions.ts): the deltas as the restore's
 * thread fetched them (`add`), the full snapshot as its chain names it. Reported for the chain that restored, in its
 * order, each once (a chain replayed again fetches its deltas again).
 */
export class RecoveredObjects {
  private readonly deltas = new Map<string, RecoveredObject>();

  readonly add = (recovered: RecoveredObject): void => {
    this.deltas.set(recovered.name, recovered);
  };

  /** Those of `chain`'s full snapshot and its first `deltas` deltas, the ones the restore used, each logged. */
  report(chain: SnapshotChain, deltas: number, logger: Logger): { recovered?: RecoveredObject[] } {
    const full = recoveredBy(chain.full);
    const used = chain.deltas.slice(0, deltas).flatMap((d) => this.deltas.get(d.name) ?? []);
    const all = full ? [full, ...used] : used;
    for (const r of all) logger.warn('recovered a snapshot hidden or replaced since it was stored', { ...r });
    return all.length > 0 ? { recovered: all } : {};
  }
}

/**
 * After a chain's full snapshot failed verification: its next older version is tried as a chain of its own, right
 * after this one in `chains` (in a fresh work dir: the failed read left its bytes in the file the engine extends).
 * With none left, the full is passed over for the previous one (`skipped`), or, when it was the one asked for
 * (`named`: --snapshot), the restore fails.
 */
export function passOverFull(
  err: UnusableFullSnapshotError,
  chain: SnapshotChain,
  chains: SnapshotChain[],
  ctx: { logger: Logger; named: boolean; skipped: Array<{ name: string; reason: string }> },
): void {
  const full = olderVersion(chain.full, err.message);
  if (full) {
    ctx.logger.warn('this version of the full snapshot does not verify; reading its older version', {
      name: chain.full.name,
      version: chain.full.versions?.id ?? 'current',
      reason: err.message,
    });
    chains.splice(chains.indexOf(chain) + 1, 0, { ...chain, full });
    return;
  }
  withVersionNote(err, chain.full, chain.full.versions?.id !== undefined);
  if (ctx.named) throw err;
  ctx.logger.warn('full snapshot failed verification; trying the previous one', {
    name: chain.full.name,
    reason: err.message,
  });
  ctx.skipped.push({ name: chain.full.name, reason: err.message });
}
