import { describeConformance } from './conformance.js';
import { S3_PART_SIZE, startS3Target } from './s3-target.js';

describeConformance('S3', async () => {
  const target = await startS3Target();
  return {
    open: (prefix) => target.open(prefix),
    partSize: S3_PART_SIZE,
    pendingUploads: async () => target.server.pendingUploads(target.bucket).length,
    stop: target.stop,
  };
});
