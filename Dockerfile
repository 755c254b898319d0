# etcd-steward: the six programs and etcdbrctl, Node 24 and etcd's tools (etcd, etcdctl, etcdutl 3.5.16) in one
# image that runs as a non-root user. Build it with scripts/image, which assembles the build context this file reads from this
# machine's own Node and etcd (no base image is pulled) and then smoke-tests the result:
#   base.tar  the runtime: node, etcd, etcdctl, etcdutl, util-linux's flock (bootstrap's lock on etcd's db), the C
#             libraries they link, CA certificates, the user
#   app.tar   /opt/etcd-steward (the built workspace with its production dependencies) and the programs' commands
FROM scratch AS runtime
ADD base.tar /

FROM runtime AS programs
ADD app.tar /

# The final image: one layer, nothing of the build stages but their files.
FROM scratch
COPY --from=programs / /
# No HOME here: it comes from /etc/passwd for the user the pod runs as (/home/steward for 10001, /home/nonroot for
# 65532, where etcd-druid mounts Local buckets and etcdbrctl looks for them, as ebr).
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    NODE_ENV=production
USER 10001:10001
WORKDIR /home/steward
# The entry point is etcdbrctl, ebr's command line (docs/moving-from-ebr.md), so that pods etcd-druid renders for
# ebr's image, which set only args (server ..., compact ..., copy ...), run unchanged. Each program is also a command
# on PATH: etcd-snapshot, etcd-restore, etcd-validate, etcd-compact, etcd-gc, etcd-copy-backups (and etcd,
# etcdctl, etcdutl); pick one with the container's command, which replaces the entry point, e.g.
#   command: [etcd-snapshot, run, --store=s3://backups/etcd]
ENTRYPOINT ["etcdbrctl"]
CMD ["--help"]
