/** The metadata this code reads and keeps; the rest of an object passes through untouched. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
  annotations?: { [key: string]: string };
}

/** One named object in the API server, as a client reaches it. */
export interface ObjectApi<T> {
  /** undefined when there is none (404). */
  read(): Promise<T | undefined>;
  create(object: T): Promise<T>;
  /** Replaces the object of `object.metadata.resourceVersion`; a ConflictError when it changed meanwhile. */
  replace(object: T): Promise<T>;
}

/** The API server answered 409: the object changed (or appeared) since it was read. */
export class ConflictError extends Error {
  constructor(message = 'the object changed since it was read') {
    super(message);
    this.name = 'ConflictError';
  }
}

/** Conflicts in a row before giving up: each means another writer just wrote, so a few suffice. */
const CONFLICT_ATTEMPTS = 5;

/**
 * Read, change, write under optimistic concurrency: the write names the resourceVersion it read, and a 409 means
 * another writer came between, so the object is read again and the change applied to what it holds now.
 * `change` returns the object to write (from `current`, or a new one when there is none), or undefined when
 * nothing needs writing. Resolves with what was written, or undefined. `onConflict` hears of each retry.
 */
export async function updateObject<T extends { metadata?: ObjectMeta }>(
  api: ObjectApi<T>,
  change: (current: T | undefined) => T | undefined,
  onConflict?: () => void,
): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    const current = await api.read();
    const next = change(current === undefined ? undefined : structuredClone(current));
    if (next === undefined) return undefined;
    try {
      return current === undefined ? await api.create(next) : await api.replace(next);
    } catch (err) {
      if (!(err instanceof ConflictError) || attempt >= CONFLICT_ATTEMPTS) throw err;
      onConflict?.();
    }
  }
}
