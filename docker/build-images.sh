#!/usr/bin/env bash
# Builds the images of the Docker failover setup, FROM scratch: this machine's Docker engine has no image
# registry, so no base image can be pulled. Each image gets its programs and exactly the shared libraries
# `ldd` lists for them (the dynamic loader included), staged in a temporary build context.
#
#   build-images.sh [etcd] [zk]     (default: both; the loadmgr image is always built)
#
#   loadmgr:local       the loadmgr binary: LOADMGR_BIN if set, else `cargo build --release --bin loadmgr`
#   loadmgr-etcd:local  Debian's /usr/bin/etcd and /usr/bin/etcdctl (etcd-server, etcd-client)
#   loadmgr-zk:local    Debian's ZooKeeper 3.8 (zookeeper: /usr/share/java/zookeeper.jar and the jars its
#                       manifest lists) on the host's Java runtime, plus bash for its start script and healthcheck
#
# Environment: LOADMGR_BIN (a loadmgr binary to use instead of building one; a debug build is fine),
# LOADMGR_IMAGE, LOADMGR_ETCD_IMAGE, LOADMGR_ZK_IMAGE (tags), ETCD_BIN, ETCDCTL_BIN (default /usr/bin/etcd,
# /usr/bin/etcdctl), LOADMGR_JAVA (the java to copy; default the one on PATH), ZK_JAR (default
# /usr/share/java/zookeeper.jar). Docker's cache makes a rebuild with the same files a no-op.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
loadmgr_image="${LOADMGR_IMAGE:-loadmgr:local}"
etcd_image="${LOADMGR_ETCD_IMAGE:-loadmgr-etcd:local}"
zk_image="${LOADMGR_ZK_IMAGE:-loadmgr-zk:local}"
etcd_bin="${ETCD_BIN:-/usr/bin/etcd}"
etcdctl_bin="${ETCDCTL_BIN:-/usr/bin/etcdctl}"
zk_jar="${ZK_JAR:-/usr/share/java/zookeeper.jar}"

die() {
  echo "build-images.sh: $*" >&2
  exit 1
}

# Which store images to build.
want_etcd=0 want_zk=0
[ $# -gt 0 ] || set -- etcd zk
for store in "$@"; do
  case "$store" in
    etcd) want_etcd=1 ;;
    zk) want_zk=1 ;;
    *) die "unknown store '$store': expected etcd and/or zk" ;;
  esac
done

command -v docker >/dev/null 2>&1 || die "docker is not installed (the Docker engine and its client are needed)"
docker info >/dev/null 2>&1 || die "docker is installed but the engine does not answer (is dockerd running? \`docker info\` says why)"
command -v ldd >/dev/null 2>&1 || die "ldd is missing (Debian package libc-bin)"
if [ "$want_etcd" = 1 ]; then
  [ -x "$etcd_bin" ] || die "$etcd_bin is missing: install the etcd-server package (scripts/install-test-deps.sh does)"
  [ -x "$etcdctl_bin" ] || die "$etcdctl_bin is missing: install the etcd-client package (scripts/install-test-deps.sh does)"
fi
if [ "$want_zk" = 1 ]; then
  [ -f "$zk_jar" ] || die "$zk_jar is missing: install the zookeeper package (scripts/install-test-deps.sh does)"
  java_bin="${LOADMGR_JAVA:-$(command -v java || true)}"
  if [ -z "$java_bin" ] || [ ! -x "$java_bin" ]; then
    die "java is missing: install default-jre-headless (scripts/install-test-deps.sh does)"
  fi
  command -v unzip >/dev/null 2>&1 || die "unzip is missing (Debian package unzip): it reads the ZooKeeper jars' class paths"
  [ -x /bin/bash ] || die "/bin/bash is missing"
fi

if [ -n "${LOADMGR_BIN:-}" ]; then
  loadmgr_bin="$LOADMGR_BIN"
  [ -x "$loadmgr_bin" ] || die "LOADMGR_BIN=$loadmgr_bin is not an executable file"
else
  command -v cargo >/dev/null 2>&1 || die "cargo is missing: install Rust, or set LOADMGR_BIN to a loadmgr binary"
  echo "build-images.sh: cargo build --release --bin loadmgr" >&2
  (cd "$repo" && cargo build --release --bin loadmgr)
  loadmgr_bin="${CARGO_TARGET_DIR:-$repo/target}/release/loadmgr"
  [ -x "$loadmgr_bin" ] || die "cargo build finished but $loadmgr_bin is not there"
fi

# Copies every shared library ldd lists for the executable or library $1 into the staged root $2, each at the
# path ldd resolved (symlinks followed), so the loader finds them in its default directories. ldd runs with the
# caller's LD_LIBRARY_PATH, for libraries that find their siblings through an rpath or dlopen.
stage_libs() {
  local file="$1" root="$2" out lib
  if ! out="$(ldd "$file" 2>&1)"; then
    case "$out" in
      *"not a dynamic executable"* | *"statically linked"*) return 0 ;;
      *) die "ldd $file failed: $out" ;;
    esac
  fi
  if grep -q "not found" <<<"$out"; then
    die "$file needs shared libraries this machine does not have:"$'\n'"$(grep "not found" <<<"$out")"
  fi
  # Lines are "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)";
  # linux-vdso has no file.
  while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out" | sort -u)
}

# Copies the executable $1 into the staged root $2 at path $3, with its shared libraries (stage_libs).
stage() {
  local bin="$1" root="$2" dest="$3"
  mkdir -p "$root$(dirname "$dest")"
  cp -L "$bin" "$root$dest"
  stage_libs "$bin" "$root"
}

# What every image needs besides its programs: name resolution through /etc/hosts and then Docker's DNS
# (Docker bind-mounts /etc/hosts, /etc/resolv.conf and /etc/hostname itself), and a /tmp.
common_files() {
  local root="$1"
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  echo "hosts: files dns" >"$root/etc/nsswitch.conf"
}

# The JNI libraries of the Java runtime that a headless server JVM loads. The others (AWT, fonts, sound, smart
# cards, the debugger's) would bring X11, ALSA and more, which ZooKeeper never touches.
jre_libs=(libjli.so server/libjvm.so libjava.so libjimage.so libzip.so libnio.so libnet.so libextnet.so
  libverify.so libjsvml.so libmanagement.so libmanagement_ext.so libjaas.so libprefs.so)

# Copies the Java runtime that $1 (a java launcher) belongs to into the staged root $2 at /usr/lib/jvm/java:
# bin/java; lib/ and conf/ with symlinks followed (several point into /etc/java-NN-openjdk) and dangling ones
# left out, without javac's ct.sym and without the native libraries not in jre_libs; and the shared libraries
# those need. The launcher finds its runtime from its own path, so the directory's name does not matter.
stage_jre() {
  local java="$1" root="$2" home dest f rel lib
  home="$(dirname "$(dirname "$(readlink -f "$java")")")"
  [ -f "$home/lib/modules" ] || die "$java is not a modular Java runtime (no $home/lib/modules)"
  dest="$root/usr/lib/jvm/java"
  mkdir -p "$dest/bin"
  cp -L "$home/bin/java" "$dest/bin/java"
  while IFS= read -r -d '' f; do
    rel="${f#"$home"/}"
    case "$rel" in
      lib/ct.sym | lib/src.zip) continue ;;
      *.so) [[ " ${jre_libs[*]} " == *" ${rel#lib/} "* ]] || continue ;;
    esac
    mkdir -p "$dest/$(dirname "$rel")"
    cp -L "$f" "$dest/$rel"
  done < <(find -L "$home/lib" "$home/conf" -type f -print0)
  for lib in "${jre_libs[@]}"; do
    [ -f "$dest/lib/$lib" ] || die "$home/lib/$lib is missing: is $java a full Java runtime?"
  done
  LD_LIBRARY_PATH="$home/lib:$home/lib/server" stage_libs "$home/bin/java" "$root"
  for lib in "${jre_libs[@]}"; do
    LD_LIBRARY_PATH="$home/lib:$home/lib/server" stage_libs "$home/lib/$lib" "$root"
  done
  # The runtime's own libraries were found at their host paths: only the copies under /usr/lib/jvm/java count.
  [ "$home" = /usr/lib/jvm/java ] || rm -rf "${root:?}$home"
}

# The Class-Path of the jar $1's manifest, one absolute path a line.
jar_class_path() {
  unzip -p "$1" META-INF/MANIFEST.MF 2>/dev/null | tr -d '\r' | awk '
    /^Class-Path:/ { on = 1; sub(/^Class-Path: */, ""); text = text $0; next }
    on && /^ / { sub(/^ /, ""); text = text $0; next }
    { on = 0 }
    END { n = split(text, parts, / +/); for (i = 1; i <= n; i++) if (parts[i] != "") print parts[i] }'
}

# Copies the jars $2... and, transitively, the jars their manifests' Class-Path lists (those that exist: Debian's
# zookeeper.jar also names jline.jar, which only zkCli uses) into the staged root $1 at the same paths.
stage_jars() {
  local root="$1" jar
  shift
  local -a todo=("$@")
  local -A seen=()
  while [ ${#todo[@]} -gt 0 ]; do
    jar="${todo[0]}"
    todo=("${todo[@]:1}")
    if [ -n "${seen[$jar]:-}" ] || [ ! -f "$jar" ]; then
      continue
    fi
    seen[$jar]=1
    mkdir -p "$root$(dirname "$jar")"
    cp -L "$jar" "$root$jar"
    mapfile -t -O "${#todo[@]}" todo < <(jar_class_path "$jar")
  done
}

ctx="$(mktemp -d "${TMPDIR:-/tmp}/loadmgr-images.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

built=("$loadmgr_image")
build() {
  local image="$1" dockerfile="$2" dir="$3" sources="$4" started
  cp "$here/$dockerfile" "$dir/Dockerfile"
  echo "build-images.sh: building $image from $sources ($(du -sh "$dir/rootfs" | cut -f1) staged)" >&2
  # No BuildKit: the Debian engine has no buildx, and the classic builder needs nothing from a registry.
  # Its deprecation notice is shown only if the build fails.
  local out
  started="$(date +%s%3N)"
  out="$(DOCKER_BUILDKIT=0 docker build --label "org.loadmgr.sources=$sources" -t "$image" "$dir" 2>&1)" \
    || die "docker build of $image failed:"$'\n'"$out"
  echo "build-images.sh: built $image in $(awk -v ms=$(($(date +%s%3N) - started)) 'BEGIN { printf "%.1f s", ms / 1000 }')" >&2
}

mkdir -p "$ctx/loadmgr/rootfs"
stage "$loadmgr_bin" "$ctx/loadmgr/rootfs" /usr/local/bin/loadmgr
common_files "$ctx/loadmgr/rootfs"
build "$loadmgr_image" loadmgr.Dockerfile "$ctx/loadmgr" "$loadmgr_bin sha256:$(sha256sum "$loadmgr_bin" | cut -c1-16)"

if [ "$want_etcd" = 1 ]; then
  mkdir -p "$ctx/etcd/rootfs"
  stage "$etcd_bin" "$ctx/etcd/rootfs" /usr/bin/etcd
  stage "$etcdctl_bin" "$ctx/etcd/rootfs" /usr/bin/etcdctl
  common_files "$ctx/etcd/rootfs"
  build "$etcd_image" etcd.Dockerfile "$ctx/etcd" "$("$etcd_bin" --version | head -n 1)"
  built+=("$etcd_image")
fi

if [ "$want_zk" = 1 ]; then
  root="$ctx/zk/rootfs"
  mkdir -p "$root"
  stage_jre "$java_bin" "$root"
  stage_jars "$root" "$zk_jar" /usr/share/java/slf4j-simple.jar
  [ -f "$root/usr/share/java/slf4j-simple.jar" ] || die "/usr/share/java/slf4j-simple.jar is missing (Debian package libslf4j-java): ZooKeeper would log nothing"
  stage /bin/bash "$root" /bin/bash
  mkdir -p "$root/usr/local/bin" "$root/data"
  cp "$here/zookeeper/zk-start" "$here/zookeeper/zk-ready" "$root/usr/local/bin/"
  common_files "$root"
  echo "root:x:0:0:root:/root:/bin/bash" >"$root/etc/passwd"
  echo "root:x:0:" >"$root/etc/group"
  zk_version="$(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo "of $zk_jar")"
  build "$zk_image" zookeeper.Dockerfile "$ctx/zk" "ZooKeeper $zk_version on $("$java_bin" -version 2>&1 | head -n 1)"
  built+=("$zk_image")
fi

docker image ls --format '{{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}' \
  | grep -E "^($(IFS='|'; echo "${built[*]}")) " >&2 || true
