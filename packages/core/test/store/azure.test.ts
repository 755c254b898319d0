import { AZURE_PART_SIZE, startAzureTarget } from './azure-target.js';
import { describeConformance } from './conformance.js';

describeConformance('Azure Blob', async () => {
  const target = await startAzureTarget();
  return { open: (prefix) => target.open(prefix), partSize: AZURE_PART_SIZE, stop: target.stop };
});
