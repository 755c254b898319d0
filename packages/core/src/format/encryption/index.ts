/**
 * Client-side encryption of stored objects (docs/encryption.md): the envelope's format, its writer and reader, the
 * check of an encrypted object without its key, and the key files.
 * May use: common/.
 */
export * from './encryption-keys.js';
export * from './envelope-check.js';
export { DEFAULT_CHUNK_SIZE, ENCRYPTION_MAGIC, EncryptionKeyError, isEncrypted } from './envelope-format.js';
export { checkEnvelopeHeader } from './envelope-header.js';
export * from './object-cipher.js';
export * from './object-decipher.js';
