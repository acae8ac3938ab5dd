# The ZooKeeper image: Debian's ZooKeeper 3.8 (package zookeeper: /usr/share/java/zookeeper.jar and the jars its
# manifest's Class-Path lists, with slf4j-simple for its logging) on the host's Java runtime, and bash for the
# start script and the healthcheck, all copied with the shared libraries `ldd` lists for them into an empty
# image (no base image can be pulled here; see build-images.sh).
FROM scratch
COPY rootfs/ /
EXPOSE 2181 2888 3888
ENTRYPOINT ["/usr/local/bin/zk-start"]
