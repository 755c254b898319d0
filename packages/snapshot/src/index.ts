export { formatSnapshotTable } from './snapshot-table.js';
