import { describeConformance } from './conformance.js';
import { SWIFT_PART_SIZE, startSwiftTarget } from './swift-target.js';

describeConformance('Swift', async () => {
  const target = await startSwiftTarget();
  return {
    open: (prefix) => target.open(prefix),
    partSize: SWIFT_PART_SIZE,
    pendingUploads: async () => (await target.strandedSegments()).length,
    stop: target.stop,
  };
});
