import { describeConformance } from './conformance.js';
import { OSS_PART_SIZE, startOssTarget } from './oss-target.js';

describeConformance('OSS', async () => {
  const target = await startOssTarget();
  return {
    open: (prefix) => target.open(prefix),
    partSize: OSS_PART_SIZE,
    pendingUploads: async () => target.server.pendingUploads(target.bucket).length,
    stop: target.stop,
  };
});
