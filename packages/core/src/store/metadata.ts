import { UsageError } from '../common/errors.js';

/**
 * Metadata keys every provider can store and give back unchanged: S3 and GCS lower-case them, Azure wants C#
 * identifiers (see azure/metadata-names.ts). Values travel as HTTP headers, so they are printable ASCII.
 */
/** Object metadata key of the id of the key an object is encrypted with, for people and tools without the key. */
export const METADATA_ENCRYPTION_KEY_ID = 'encryption-key-id';

const KEY = /^[a-z][a-z0-9-]{0,62}$/;
const VALUE = /^[\x20-\x7e]{0,1024}$/;

export function checkMetadata(metadata: Record<string, string> | undefined): void {
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (!KEY.test(key)) {
      throw new UsageError(`metadata key "${key}": use lower-case letters, digits and "-", starting with a letter`);
    }
    if (typeof value !== 'string' || !VALUE.test(value)) {
      throw new UsageError(`metadata "${key}": values are printable ASCII, at most 1024 characters`);
    }
  }
}
