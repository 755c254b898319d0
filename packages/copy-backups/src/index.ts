// The copy, export, import and verify are library code in core (core/src/copy), so that other programs can use them.
export {
  type CopyBackupsOptions,
  type CopySummary,
  copyBackups,
  exportBackups,
  importBackups,
  type StoreVerifyReport,
  VERIFY_EXIT_CODES,
  verifyStore,
} from '@etcd-steward/core';
