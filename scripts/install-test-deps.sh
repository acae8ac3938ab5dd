#!/usr/bin/env bash
# Makes sure the programs the test suite needs are installed: protoc and its well-known .proto files
# (libprotobuf-dev: only recommended by protobuf-compiler, so --no-install-recommends leaves them out, and the
# etcd client's build needs google/protobuf/descriptor.proto), ZooKeeper 3.8
# and etcd 3.4 servers and their command-line clients, openssl (TLS test certificates), curl (the web service
# tests), Prometheus and promtool (scraping the brokers), headless Chromium and its WebDriver (the dashboard's
# browser test), and python3-venv (scripts/install-python-deps.sh), all
# from Debian packages. As root, missing packages are installed with apt-get; otherwise the script stops with the exact
# command to run.
set -euo pipefail

declare -A need=(
  [protobuf-compiler]=/usr/bin/protoc
  [libprotobuf-dev]=/usr/include/google/protobuf/descriptor.proto
  [zookeeper]=/usr/share/zookeeper/bin/zkServer.sh
  [etcd-server]=/usr/bin/etcd
  [etcd-client]=/usr/bin/etcdctl
  [openssl]=/usr/bin/openssl
  [curl]=/usr/bin/curl
  [prometheus]=/usr/bin/prometheus
  [chromium]=/usr/bin/chromium
  [chromium-driver]=/usr/bin/chromedriver
  [fonts-dejavu-core]=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
)

missing=()
for pkg in protobuf-compiler libprotobuf-dev zookeeper etcd-server etcd-client openssl curl prometheus chromium chromium-driver fonts-dejavu-core; do
  [ -e "${need[$pkg]}" ] || missing+=("$pkg")
done
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
if ! command -v java >/dev/null 2>&1 && [[ ! " ${missing[*]} " == *" zookeeper "* ]]; then
  missing+=(default-jre-headless)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "The test suite needs these Debian packages: ${missing[*]}" >&2
  echo "Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "Installing ${missing[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for pkg in "${missing[@]}"; do
  case "$pkg" in
    default-jre-headless) command -v java >/dev/null ;;
    python3-venv) python3 -c 'import ensurepip, venv' ;;
    *) [ -e "${need[$pkg]}" ] ;;
  esac || { echo "installing $pkg did not provide what the tests need" >&2; exit 1; }
done
