/**
 * The environment for etcd's Go programs that a restore runs briefly over a whole db: `etcdutl`/`etcdctl
 * snapshot restore`, and the etcd that verifies the result. Both build an index of every revision in the db.
 * Go's collector lets the heap grow to twice what is live before it collects (GOGC=100); that headroom is
 * anonymous memory, which a container's memory limit cannot reclaim the way it drops the mapped db's clean
 * pages. At GOGC=25 the etcd verifying a 354 MB db peaked at 64 MB of anonymous memory instead of 103, and
 * started as fast (docs/restore.md, "Measured"). An operator's own GOGC or GOMEMLIMIT is kept as it is.
 */
export function briefGoProgramEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  if (env.GOGC !== undefined || env.GOMEMLIMIT !== undefined) return env;
  return { ...env, GOGC: '25' };
}
