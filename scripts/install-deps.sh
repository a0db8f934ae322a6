#!/usr/bin/env bash
# Installs, from Debian's packages, everything the test suite and the benchmarks use:
# the real servers volley manages (nginx, Apache, lighttpd, Caddy), the peers it is
# compared with (wrk, ab, httperf, h2load), litmus and python3-caldav for the WebDAV and
# CalDAV checks, and chromium for the HTML report check. Services are *not* left running:
# volley starts its own copies on loopback with generated configs.
set -euo pipefail

# The servers volley manages (and their TLS/compression modules) come from one list.
"$(dirname "$0")/install-servers.sh"
"$(dirname "$0")/install-k8s-validate.sh"

pkgs=(wrk apache2-utils httperf nghttp2-client
      litmus python3-caldav chromium
      sqlite3 procps iproute2 curl nats-server
      openssh-server)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Keep package scripts from starting the daemons on port 80: policy-rc.d exit 101 means
# "action forbidden". Only remove the file if we created it.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
trap '[ $created_policy -eq 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Some packages may be missing on other releases; install what exists.
avail=()
for p in "${missing[@]}"; do
  if apt-cache show "$p" >/dev/null 2>&1; then avail+=("$p"); else echo "install-deps: $p not available, skipped" >&2; fi
done
$SUDO apt-get install -y -qq --no-install-recommends "${avail[@]}" >/dev/null
# Stop anything a package started anyway (no systemd here, so use the init scripts).
for s in nginx apache2 lighttpd caddy; do
  pkill -x "$s" 2>/dev/null || true
done
