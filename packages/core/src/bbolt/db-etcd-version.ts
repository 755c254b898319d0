import { closeSync, openSync } from 'node:fs';
import { BboltReader } from './bbolt-file.js';

/** A major.minor etcd version, e.g. 3.5. */
export interface EtcdMinorVersion {
  major: number;
  minor: number;
}

export function parseMinorVersion(version: string): EtcdMinorVersion | undefined {
  const match = /^(\d+)\.(\d+)/.exec(version);
  return match ? { major: Number(match[1]), minor: Number(match[2]) } : undefined;
}

export function newerThan(a: EtcdMinorVersion, b: EtcdMinorVersion): boolean {
  return a.major > b.major || (a.major === b.major && a.minor > b.minor);
}

/**
 * The newest etcd version an etcd db (a snapshot file or `member/snap/db`) shows it was written by, from what
 * each version adds (docs/etcd-formats.md): the `cluster` bucket's `clusterVersion` ("3.5.0" once a 3.5
 * cluster has settled its version), 3.5's `term` and `confState` in `meta` (written with every commit, so
 * present even before the cluster version is), and 3.6's `storageVersion`. A 3.4 db shows none of the 3.5+
 * marks: undefined then means "3.4 or older".
 */
export function dbEtcdVersion(path: string): EtcdMinorVersion | undefined {
  const fd = openSync(path, 'r');
  try {
    const reader = new BboltReader(fd);
    const buckets = reader.buckets();
    const found: EtcdMinorVersion[] = [];
    const meta = buckets.get('meta');
    if (meta) {
      for (const e of reader.elements(meta)) {
        const name = e.key.toString('latin1');
        if (name === 'term' || name === 'confState') found.push({ major: 3, minor: 5 });
        if (name === 'storageVersion') found.push(...versionOf(e.value));
      }
    }
    const cluster = buckets.get('cluster');
    if (cluster) {
      for (const e of reader.elements(cluster)) {
        if (e.key.toString('latin1') === 'clusterVersion') found.push(...versionOf(e.value));
      }
    }
    return found.reduce<EtcdMinorVersion | undefined>((a, b) => (a && !newerThan(b, a) ? a : b), undefined);
  } finally {
    closeSync(fd);
  }
}

function versionOf(value: Buffer): EtcdMinorVersion[] {
  const version = parseMinorVersion(value.toString('latin1'));
  return version ? [version] : [];
}
