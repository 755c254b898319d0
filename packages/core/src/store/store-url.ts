import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { UsageError } from '../common/errors.js';

/** The URL schemes of the providers location.ts opens. */
export const STORE_SCHEMES: readonly string[] = ['file', 's3', 'gs', 'azblob', 'swift', 'oss', 'ecs', 'ocs'];

/** A parsed `--store` URL: provider scheme, container (bucket, or directory for file://) and prefix. */
export interface StoreLocation {
  scheme: string;
  container: string;
  prefix: string;
  url: URL;
}

/** `flag` names where the URL was given, for messages. */
export function parseStoreUrl(raw: string, flag = '--store'): StoreLocation {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(
      `${flag} "${raw}" is not a URL: use file:///path, s3://bucket/prefix, gs://bucket/prefix, azblob://container/prefix, swift://container/prefix, oss://bucket/prefix, ecs://bucket/prefix or ocs://bucket/prefix`,
    );
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (!STORE_SCHEMES.includes(scheme)) {
    throw new UsageError(
      `${flag} "${redact(url)}": unknown store scheme "${scheme}:"; use one of ${STORE_SCHEMES.map((s) => `${s}://`).join(', ')}`,
    );
  }
  if (scheme === 'file') {
    if (url.host && url.host !== 'localhost') {
      throw new UsageError(`${flag} "${raw}": a file:// URL needs an absolute path, e.g. file:///var/backups/etcd`);
    }
    // The cloud providers check their options when they open (query-options.ts); a directory takes none.
    const options = [...url.searchParams.keys()];
    if (options.length > 0) {
      throw new UsageError(
        `${flag} ${redact(url)}: unknown option${options.length > 1 ? 's' : ''} ${options.join(', ')}; this kind of store takes none`,
      );
    }
    return { scheme, container: decodeURIComponent(url.pathname), prefix: '', url };
  }
  if (!url.host) {
    throw new UsageError(`${flag} "${redact(url)}" names no bucket or container: use ${scheme}://NAME/prefix`);
  }
  return { scheme, container: url.host, prefix: decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, ''), url };
}

/** The URL without user info or query (which may carry credentials), for messages. */
export function redact(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/**
 * Whether two locations are one store however they are spelled: a trailing or doubled slash, `.` and `..`, a
 * `localhost` host or a symbolic link (file://), slashes around a prefix. Of the query options only those that
 * name the server are compared (`endpoint`, Azure's `domain`): one bucket name on two servers (a MinIO and AWS, two
 * S3-compatible services) is two stores; the transfer options change nothing of what is stored.
 */
export function sameStore(a: StoreLocation, b: StoreLocation): boolean {
  return storeIdentity(a) === storeIdentity(b);
}

/** The query options that say which server holds the bucket. */
const SERVER_OPTIONS = ['endpoint', 'domain'];

function storeIdentity(location: StoreLocation): string {
  if (location.scheme !== 'file') {
    const server = SERVER_OPTIONS.map((o) => {
      const value = location.url.searchParams.get(o);
      return value === null ? '' : `${o}=${value.trim().toLowerCase().replace(/\/+$/, '')}`;
    }).join('&');
    return `${location.scheme}://${location.container}/${location.prefix}?${server}`;
  }
  const dir = resolve(location.container);
  let real = dir;
  try {
    real = realpathSync(dir);
  } catch {
    // not there yet: then it is not the other store, which must exist to be copied from
  }
  return `file://${real}`;
}
