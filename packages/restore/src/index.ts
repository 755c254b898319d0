// etcd-restore is a command over core's restore library (packages/core/src/restore); it has no API of its own.
export {};
