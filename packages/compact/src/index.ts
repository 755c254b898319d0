// etcd-compact is a command over core's compaction library (packages/core/src/compaction); it has no API of its own.
export {};
