import { type ApiArgs, apiPart } from './api/api-part.js';
import { type GarbageCollectionArgs, garbageCollectionPart } from './garbage-collection/garbage-collection-part.js';
import { type InitializationArgs, initializationPart } from './initialization/initialization-part.js';
import { type KubernetesArgs, kubernetesPart } from './kubernetes/kubernetes-part.js';
import { type AlarmsArgs, alarmsPart } from './maintenance/alarms-part.js';
import { type CorruptFenceArgs, corruptFencePart } from './maintenance/corrupt-fence-part.js';
import { type DefragmentationArgs, defragmentationPart } from './maintenance/defragmentation-part.js';
import { type ProofRecordArgs, proofRecordPart } from './proof-record/proof-record-part.js';
import type { SidecarPart } from './sidecar-part.js';
import { type SnapshottingArgs, snapshottingPart } from './snapshotting/snapshotting-part.js';
import { type StoreProtectionArgs, storeProtectionPart } from './store-protection/store-protection-part.js';

/** Every part's flags, as yargs parsed them (the sidecar's own are in sidecar-config.ts). */
export type PartArgs = SnapshottingArgs &
  DefragmentationArgs &
  AlarmsArgs &
  CorruptFenceArgs &
  GarbageCollectionArgs &
  ProofRecordArgs &
  StoreProtectionArgs &
  KubernetesArgs &
  InitializationArgs &
  ApiArgs;

/**
 * The sidecar's parts, in the order they are built and started: the snapshotter first (others use it), the API
 * last (it serves every other part's routes). Stopped in reverse.
 */
export const SIDECAR_PARTS: readonly SidecarPart<PartArgs>[] = [
  snapshottingPart,
  defragmentationPart,
  alarmsPart,
  corruptFencePart,
  garbageCollectionPart,
  proofRecordPart,
  storeProtectionPart,
  kubernetesPart,
  initializationPart,
  apiPart,
];
