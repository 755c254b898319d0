import { errorMessage, parseDuration, UsageError } from '@etcd-steward/core/common';
import { openStore, storeProtection } from '@etcd-steward/core/store';
import type { SidecarPart } from '../sidecar-part.js';

export interface StoreProtectionArgs {
  'require-immutable-store': boolean;
  'store-protection-period': string;
}

/**
 * How the store is protected from deletes and overwrites (docs/stores.md, "Immutable stores"): logged at start, read
 * again every period, published as metrics; with --require-immutable-store, a store that answers and is not immutable
 * stops the sidecar before it starts (exit 2), since backups an attacker with its credentials can take away are not
 * what was asked for. A store that does not answer yet is an outage, not a setting: it is checked once it answers.
 */
export const storeProtectionPart: SidecarPart<StoreProtectionArgs> = {
  name: 'store-protection',
  heading: 'Store protection',
  options: (y) =>
    y
      .option('require-immutable-store', {
        type: 'boolean',
        default: false,
        describe:
          'Refuse to start unless the store is immutable (S3: versioning with Object Lock and a default retention; GCS: a retention policy), and alert while it is not (etcd_snapshot_store_immutable_required)',
      })
      .option('store-protection-period', {
        type: 'string',
        default: '1h',
        describe:
          "Read the store's protection (versioning, Object Lock, retention) this often and publish it as etcd_snapshot_store_immutable and friends; 0: only at start with --require-immutable-store, else never",
      }),

  async configure(args, base) {
    const periodMs = parseDuration(args['store-protection-period'], 'store-protection-period');
    const required = args['require-immutable-store'];
    if (periodMs === 0 && !required) return undefined;
    if (required) await refuseMutableStore(base.storeUrl, base.encryptionKeyFile);
    return async (assembly, context) => {
      const { StoreProtectionMetrics } = await import('./store-protection-metrics.js');
      return [new StoreProtectionMetrics({ store: assembly.store, periodMs, required }, context)];
    };
  },
};

/** Stops the sidecar (exit 2) when its store answers and says it is not immutable, or hides whether it is. */
async function refuseMutableStore(url: string, encryptionKeyFile: string | undefined): Promise<void> {
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    store = await openStore(url, { encryptionKeyFile, allowMissingFolder: true, retry: { attempts: 2 } });
  } catch (err) {
    if (err instanceof UsageError) throw err;
    return; // unreachable now: the metrics say so once it answers (late-store.ts)
  }
  try {
    const protection = await storeProtection(store).catch((err: unknown) => {
      throw new UsageError(
        `--require-immutable-store: cannot read how ${store!.location} is protected (${errorMessage(err)}); grant the permission named, or leave the flag out`,
      );
    });
    if (protection.immutable) return;
    const unknown = protection.unknown ? ` (${protection.unknown.join('; ')})` : '';
    throw new UsageError(
      `--require-immutable-store: ${store.location} is not immutable: ${protection.summary}${unknown}. Turn on S3 Object Lock with a default retention (or a GCS retention policy): docs/stores.md, "Immutable stores"; or leave the flag out`,
    );
  } finally {
    await store.close?.();
  }
}
