import { errorMessage } from '../common/errors.js';
import type { Logger } from '../common/logger.js';

/** How often a restore plans again after the store changed under it, before it gives up. */
const MAX_REPLANS = 3;

/**
 * Runs a restore again, from a fresh listing, when an object it planned with was gone by the time it read it:
 * etcd-gc or etcd-compact removed it meanwhile (they take the store's lock, readers do not), and the store's new
 * chain restores the same history. Any other failure, or the store changing more than MAX_REPLANS times, is the
 * caller's.
 */
export async function replanWhileChanging<T>(attempt: () => Promise<T>, logger: Logger): Promise<T> {
  for (let replans = 0; ; replans++) {
    try {
      return await attempt();
    } catch (err) {
      const gone = vanishedObject(err);
      if (gone === undefined || replans >= MAX_REPLANS) throw err;
      logger.warn('the store changed while restoring (gc or compaction removed a snapshot); planning again', {
        gone,
      });
    }
  }
}

/** The object a read found gone (ObjectNotFoundError; the replay child reports errors as their messages). */
function vanishedObject(err: unknown): string | undefined {
  return /: there is no object "([^"]+)"/.exec(errorMessage(err))?.[1];
}
