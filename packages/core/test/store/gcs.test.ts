import { describeConformance } from './conformance.js';
import { GCS_PART_SIZE, startGcsTarget } from './gcs-target.js';

describeConformance('GCS', async () => {
  const target = await startGcsTarget();
  return {
    open: (prefix) => target.open(prefix),
    partSize: GCS_PART_SIZE,
    pendingUploads: async () => target.server.openSessions(),
    stop: target.stop,
  };
});
