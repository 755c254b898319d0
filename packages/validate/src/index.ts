// The checks are library code in core, so that the sidecar and the restore can run them too.
export { type DataDirReport, type ValidateOptions, VERDICTS, validateDataDir } from '@etcd-steward/core';
