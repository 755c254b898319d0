import type { ProofRecord, SavedFullSnapshot } from '@etcd-steward/core/backup';
import type { EtcdConnection } from '@etcd-steward/core/etcd';
import type { SnapshotKind } from '@etcd-steward/core/format';
import type { SnapStore } from '@etcd-steward/core/store';
import type { Argv } from 'yargs';
import type { Component, ComponentContext, Route } from './component.js';
import type { Leadership } from './leadership/leadership.js';
import type { Serial } from './serial.js';

/** The settings every part shares: what the sidecar's own flags (sidecar-config.ts) give. */
export interface SidecarBase {
  /** This sidecar's own etcd member: the first of --endpoints. */
  connection: EtcdConnection;
  storeUrl: string;
  /** Snapshots are encrypted with this file's first key, and read with any (docs/encryption.md). */
  encryptionKeyFile?: string;
  /** The prefix inside the bucket, as ebr's JSON shows it. */
  storePrefix: string;
  /** Multipart uploads begun longer ago than this were left by a killed writer (S3). */
  incompleteUploadMaxAgeMs: number;
  /** How often leadership is asked (--reelection-period). */
  reelectionPeriodMs: number;
}

/** What the sidecar has made before its parts are built, and what earlier parts added for later ones. */
export interface Assembly {
  base: SidecarBase;
  /** The store, opened late when it did not answer at start (late-store.ts). */
  store: SnapStore;
  leadership: Leadership;
  /** The leader's maintenance queue: scheduled defragmentation and NOSPACE recovery, one after the other. */
  maintenance: Serial;
  /** Set by the snapshotting part, which is built first; undefined while it is switched off. */
  snapshotter?: Snapshotter;
  /** Set by the proof-record part: the restore drill's record as last read from the store. */
  proofRecord?: () => ProofRecord | undefined;
  /** The routes of every component built so far, and whether all are healthy (for the API, built last). */
  routes(): Route[];
  healthy(): boolean;
  /** Every part's metrics, for /metrics. */
  metrics(): ComponentContext['registry'];
}

/** Makes a part's components, on the part's own registry. */
export type PartBuild = (assembly: Assembly, context: ComponentContext) => Promise<Component[]> | Component[];

/**
 * One component of the sidecar as its folder declares it: its flags (shown under `heading` in --help; each also
 * read from ETCD_STEWARD_<FLAG>), how they switch it on and configure it, and how it is built. Its metrics and
 * routes are those its components register and offer; parts.ts lists every part.
 */
export interface SidecarPart<A> {
  readonly name: string;
  readonly heading: string;
  options(y: Argv): Argv;
  /**
   * Checks the part's flags, before anything runs (bad input throws UsageError: exit 2). Undefined when they
   * switch the part off; otherwise how to build it.
   */
  configure(args: A, base: SidecarBase): Promise<PartBuild | undefined> | PartBuild | undefined;
  /** Started right after the leadership, so stopped after everything else (the Kubernetes publishers). */
  readonly startsEarly?: true;
}

/** A snapshot now in the store, as the snapshotter reports it to its metrics and to whoever listens. */
export interface SavedSnapshot {
  kind: SnapshotKind;
  lastRevision: number;
  /** Unix seconds, from the snapshot's name. */
  createdAt: number;
}

/** What the other parts use of the snapshotter (snapshotting/snapshotter-component.ts). */
export interface Snapshotter {
  /** Whether this sidecar takes the snapshots right now. */
  readonly leading: boolean;
  /** The oldest revision the deltas still need from etcd's history (a compaction must keep it). */
  readonly neededRevision: number | undefined;
  full(final: boolean): Promise<SavedFullSnapshot>;
  /** Every snapshot stored from now on; listeners must not throw. */
  onSaved(listener: (saved: SavedSnapshot) => void): () => void;
}
