# The loadmgr image. There is no image registry on the machines this is built on, so there is no base image:
# build-images.sh stages `rootfs/` with the loadmgr binary and exactly the shared libraries `ldd` lists for it
# (with the dynamic loader), and this file copies that into an empty image.
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/local/bin/loadmgr"]
CMD ["--help"]
