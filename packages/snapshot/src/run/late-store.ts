import type { Readable } from 'node:stream';
import { errorMessage, type Logger, OperationError } from '@etcd-steward/core/common';
import {
  type GetOptions,
  isTransient,
  openStore,
  type PutOptions,
  parseStoreUrl,
  redact,
  type SnapStore,
  type StoredObject,
  storeFile,
} from '@etcd-steward/core/store';

/**
 * Opens the sidecar's store. A store that cannot be reached at start (down, refusing connections, failing
 * with 5xx) is an outage like one later, not a configuration mistake: the sidecar starts with a LateStore,
 * which opens the real one when it first answers. A misconfigured store (bad URL or options, unknown bucket,
 * refused credentials, unknown host) still stops the program (exit 2). A `file://` store's folder that is not there
 * yet is created by the first snapshot, as a writer's is.
 */
export async function openSidecarStore(
  url: string,
  logger: Logger,
  options: { encryptionKeyFile?: string } = {},
): Promise<SnapStore> {
  try {
    return await openStore(url, { ...options, allowMissingFolder: true });
  } catch (err) {
    if (!isOutage(err)) throw err;
    logger.warn('the store is unreachable at start; the sidecar runs and uses it once it answers', {
      store: redact(parseStoreUrl(url).url),
      reason: errorMessage(err),
    });
    return new LateStore(url, options);
  }
}

/** The store did not answer, or answered with a failure that may pass: nothing says it is set up wrong. */
function isOutage(err: unknown): boolean {
  if (err instanceof OperationError) return true;
  const cause = (err as { cause?: unknown }).cause;
  return isTransient(cause) || (cause as { code?: unknown } | undefined)?.code === 'ECONNREFUSED';
}

/** A store opened on first use, and again on each use until opening succeeds. */
export class LateStore implements SnapStore {
  readonly location: string;
  private opened?: Promise<SnapStore>;

  constructor(
    private readonly url: string,
    private readonly options: { encryptionKeyFile?: string } = {},
  ) {
    this.location = redact(parseStoreUrl(url).url);
  }

  async put(name: string, body: Readable, options?: PutOptions): Promise<void> {
    let store: SnapStore;
    try {
      store = await this.store();
    } catch (err) {
      body.destroy();
      throw err;
    }
    return store.put(name, body, options);
  }

  async putFile(name: string, path: string, options?: PutOptions): Promise<void> {
    return storeFile(await this.store(), name, path, options);
  }

  async get(name: string, options?: GetOptions): Promise<Readable> {
    return (await this.store()).get(name, options);
  }

  async list(prefix?: string): Promise<StoredObject[]> {
    return (await this.store()).list(prefix);
  }

  async stat(name: string): Promise<StoredObject | undefined> {
    return (await this.store()).stat(name);
  }

  async delete(name: string): Promise<void> {
    return (await this.store()).delete(name);
  }

  async close(): Promise<void> {
    const opened = this.opened;
    this.opened = undefined;
    await (await opened?.catch(() => undefined))?.close?.();
  }

  /** The real store, opened now if it was not yet. */
  store(): Promise<SnapStore> {
    this.opened ??= openStore(this.url, { ...this.options, allowMissingFolder: true }).catch((err) => {
      this.opened = undefined;
      throw new OperationError(`${this.location}: the store is unreachable (${errorMessage(err)})`, { cause: err });
    });
    return this.opened;
  }
}
