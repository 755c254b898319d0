import { parentLogger } from '../common/child-process.js';
import { errorMessage } from '../common/errors.js';
import type { SnapshotChildMessage } from './isolated-snapshot.js';
import { type SnapshotToFileRequest, snapshotToFile } from './snapshot-to-file.js';

// The child side of isolated-snapshot.ts: one snapshot written to its file, the outcome sent back.
const logger = parentLogger();
let finished = false;
// Without its parent nobody takes the file: stop.
process.on('disconnect', () => {
  if (!finished) process.exit(1);
});
process.on('message', (m: { type: string; request?: SnapshotToFileRequest }) => {
  if (m.type === 'start' && m.request) void run(m.request);
});

async function run(request: SnapshotToFileRequest): Promise<void> {
  let outcome: SnapshotChildMessage;
  try {
    outcome = { type: 'done', result: await snapshotToFile(request, logger) };
  } catch (err) {
    outcome = { type: 'failed', message: errorMessage(err) };
  }
  finished = true;
  process.send!(outcome, () => process.disconnect());
}
