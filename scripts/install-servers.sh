#!/usr/bin/env bash
# Installs the web servers `volley --target KIND` manages, from Debian's packages:
# nginx (+ brotli filter/static modules, + dav-ext for PROPFIND), Apache httpd (event
# and prefork MPMs, mod_brotli and mod_dav ship with apache2), lighttpd (+ mod_deflate,
# which does brotli, + mod_webdav) and Caddy.
#
# Idempotent: packages already installed are skipped, and a second run does nothing.
# No daemon is left running: package scripts are forbidden to start services while this
# runs (policy-rc.d exit 101), because volley starts its own copies on loopback with
# generated configurations and a system copy on port 80 would only add noise. Nothing
# is stopped either: a server already running belongs to the user.
#
# `install-servers.sh --packages P...` installs P... instead, under the same guard
# (install-deps.sh uses it for the load generators and test tools).
set -euo pipefail

name=install-servers
pkgs=(nginx libnginx-mod-http-brotli-filter libnginx-mod-http-brotli-static
      libnginx-mod-http-dav-ext lighttpd-mod-webdav
      apache2 lighttpd lighttpd-mod-deflate lighttpd-mod-openssl caddy)
if [ "${1:-}" = "--packages" ]; then
  shift
  name=install-deps
  pkgs=("$@")
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$name: all packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# policy-rc.d exit 101 = "action forbidden": postinst scripts will not start the
# daemons. Only remove the file if this script created it.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
avail=()
for p in "${missing[@]}"; do
  if apt-cache show "$p" >/dev/null 2>&1; then
    avail+=("$p")
  else
    echo "$name: $p is not available on this release, skipped" >&2
  fi
done
if [ ${#avail[@]} -gt 0 ]; then
  echo "$name: installing ${avail[*]}"
  $SUDO apt-get install -y -qq --no-install-recommends "${avail[@]}" >/dev/null
fi

if [ "$name" = install-servers ]; then
  echo "install-servers: done; check with: volley targets"
fi
