# etcd-steward: the six programs, Node 24 and etcd's tools (etcd, etcdctl, etcdutl 3.5.16) in one image that runs
# as a non-root user. Build it with scripts/image, which assembles the build context this file reads from this
# machine's own Node and etcd (no base image is pulled) and then smoke-tests the result:
#   base.tar  the runtime: node, etcd, etcdctl, etcdutl, the C libraries they link, CA certificates, the user
#   app.tar   /opt/etcd-steward (the built workspace with its production dependencies) and the programs' commands
FROM scratch AS runtime
ADD base.tar /

FROM runtime AS programs
ADD app.tar /

# The final image: one layer, nothing of the build stages but their files.
FROM scratch
COPY --from=programs / /
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    HOME=/home/steward \
    NODE_ENV=production
USER 10001:10001
WORKDIR /home/steward
# Each program is a command on PATH: etcd-snapshot, etcd-restore, etcd-validate, etcd-compact, etcd-gc,
# etcd-copy-backups (and etcd, etcdctl, etcdutl). Pick one with the container's command, e.g.
#   command: [etcd-snapshot, run, --store=s3://backups/etcd]
ENTRYPOINT []
CMD ["etcd-snapshot", "--help"]
