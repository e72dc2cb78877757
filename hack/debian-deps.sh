#!/usr/bin/env bash
# Installs the Debian packages the tests and the demo need when they are
# missing: containerd, runc and the CNI plugins for the real node of the
# testbed (and iproute2 for its teardown), chromium for the browser test
# of the demo page, prometheus (Prometheus and promtool) for test/prom and
# test/monitoring, ca-certificates for lifeboat's image (hack/imagebuild).
# Installing prometheus may enable its system service; the
# tests start their own Prometheus on a free port. As root it runs
# apt-get itself; otherwise it stops with the one command to run.
# Usage: hack/debian-deps.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for p in "${missing[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || { echo "Debian package $p did not install" >&2; exit 1; }
done
