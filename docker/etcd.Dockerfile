# The etcd image: Debian's etcd 3.4 server and etcdctl (packages etcd-server, etcd-client), copied with the
# shared libraries `ldd` lists for them into an empty image (no base image can be pulled here; see
# build-images.sh).
FROM scratch
COPY rootfs/ /
EXPOSE 2379 2380
CMD ["/usr/bin/etcd", "--version"]
