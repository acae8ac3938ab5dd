#!/usr/bin/env bash
# Builds the two images of the Docker failover setup, FROM scratch: this machine's Docker engine has no image
# registry, so no base image can be pulled. Each image gets its binaries and exactly the shared libraries
# `ldd` lists for them (the dynamic loader included), staged in a temporary build context.
#
#   loadmgr:local       the loadmgr binary: LOADMGR_BIN if set, else `cargo build --release --bin loadmgr`
#   loadmgr-etcd:local  Debian's /usr/bin/etcd and /usr/bin/etcdctl (etcd-server, etcd-client)
#
# Environment: LOADMGR_BIN (a loadmgr binary to use instead of building one; a debug build is fine),
# LOADMGR_IMAGE, LOADMGR_ETCD_IMAGE (tags), ETCD_BIN, ETCDCTL_BIN (default /usr/bin/etcd, /usr/bin/etcdctl).
# Docker's cache makes a rebuild with the same binaries a no-op.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
loadmgr_image="${LOADMGR_IMAGE:-loadmgr:local}"
etcd_image="${LOADMGR_ETCD_IMAGE:-loadmgr-etcd:local}"
etcd_bin="${ETCD_BIN:-/usr/bin/etcd}"
etcdctl_bin="${ETCDCTL_BIN:-/usr/bin/etcdctl}"

die() {
  echo "build-images.sh: $*" >&2
  exit 1
}

command -v docker >/dev/null 2>&1 || die "docker is not installed (the Docker engine and its client are needed)"
docker info >/dev/null 2>&1 || die "docker is installed but the engine does not answer (is dockerd running? \`docker info\` says why)"
command -v ldd >/dev/null 2>&1 || die "ldd is missing (Debian package libc-bin)"
[ -x "$etcd_bin" ] || die "$etcd_bin is missing: install the etcd-server package (scripts/install-test-deps.sh does)"
[ -x "$etcdctl_bin" ] || die "$etcdctl_bin is missing: install the etcd-client package (scripts/install-test-deps.sh does)"

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

# Copies the executable $1 into the staged root $2 at path $3, with every shared library ldd lists for it, each
# at the path ldd resolved (symlinks followed), so the loader finds them in its default directories.
stage() {
  local bin="$1" root="$2" dest="$3" out lib
  mkdir -p "$root$(dirname "$dest")"
  cp -L "$bin" "$root$dest"
  if ! out="$(ldd "$bin" 2>&1)"; then
    case "$out" in
      *"not a dynamic executable"* | *"statically linked"*) return 0 ;;
      *) die "ldd $bin failed: $out" ;;
    esac
  fi
  if grep -q "not found" <<<"$out"; then
    die "$bin needs shared libraries this machine does not have:"$'\n'"$(grep "not found" <<<"$out")"
  fi
  # Lines are "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)";
  # linux-vdso has no file.
  while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out" | sort -u)
}

# What every image needs besides its binaries: name resolution through /etc/hosts and then Docker's DNS
# (Docker bind-mounts /etc/hosts, /etc/resolv.conf and /etc/hostname itself), and a /tmp.
common_files() {
  local root="$1"
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  echo "hosts: files dns" >"$root/etc/nsswitch.conf"
}

ctx="$(mktemp -d "${TMPDIR:-/tmp}/loadmgr-images.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

build() {
  local image="$1" dockerfile="$2" dir="$3" sources="$4"
  cp "$here/$dockerfile" "$dir/Dockerfile"
  echo "build-images.sh: building $image from $sources ($(du -sh "$dir/rootfs" | cut -f1) staged)" >&2
  # No BuildKit: the Debian engine has no buildx, and the classic builder needs nothing from a registry.
  # Its deprecation notice is shown only if the build fails.
  local out
  out="$(DOCKER_BUILDKIT=0 docker build --label "org.loadmgr.sources=$sources" -t "$image" "$dir" 2>&1)" \
    || die "docker build of $image failed:"$'\n'"$out"
}

mkdir -p "$ctx/loadmgr/rootfs"
stage "$loadmgr_bin" "$ctx/loadmgr/rootfs" /usr/local/bin/loadmgr
common_files "$ctx/loadmgr/rootfs"
build "$loadmgr_image" loadmgr.Dockerfile "$ctx/loadmgr" "$loadmgr_bin sha256:$(sha256sum "$loadmgr_bin" | cut -c1-16)"

mkdir -p "$ctx/etcd/rootfs"
stage "$etcd_bin" "$ctx/etcd/rootfs" /usr/bin/etcd
stage "$etcdctl_bin" "$ctx/etcd/rootfs" /usr/bin/etcdctl
common_files "$ctx/etcd/rootfs"
build "$etcd_image" etcd.Dockerfile "$ctx/etcd" "$("$etcd_bin" --version | head -n 1)"

docker image ls --format '{{.Repository}}:{{.Tag}}  {{.ID}}  {{.Size}}' | grep -E "^(${loadmgr_image}|${etcd_image}) " >&2 || true
