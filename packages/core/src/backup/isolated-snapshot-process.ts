import { serveParent } from '../common/child-process.js';
import { type SnapshotToFileRequest, snapshotToFile } from './snapshot-to-file.js';

// The child side of isolated-snapshot.ts: one snapshot written to its file, the outcome sent back.
serveParent((request: SnapshotToFileRequest, logger) => snapshotToFile(request, logger));
