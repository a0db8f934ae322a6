#!/usr/bin/env bash
# Installs aioquic (PyPI) into /opt/volley-venv (or $VOLLEY_VENV), the venv of the
# CalDAV servers: an HTTP/3 client no one here wrote, which tests/serve_h3.rs uses to
# fetch from `volley serve --h3`. Pinned so the test talks to the same client code.
# Idempotent: when the pin is installed it only checks and exits.
set -euo pipefail

venv="${VOLLEY_VENV:-/opt/volley-venv}"
# The newest release PyPI served when the built-in server learnt HTTP/3.
AIOQUIC_VERSION=1.7.2

installed() {
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - "$AIOQUIC_VERSION" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
sys.exit(0 if version("aioquic") == sys.argv[1] else 1)
PY
}
if installed; then
  echo "install-aioquic: aioquic $AIOQUIC_VERSION already in $venv"
  exit 0
fi
# The venv itself comes from install-caldav.sh.
[ -x "$venv/bin/python" ] || "$(dirname "$0")/install-caldav.sh"
SUDO=""
[ "$(id -u)" -eq 0 ] || [ -w "$venv" ] || SUDO="sudo"
$SUDO "$venv/bin/pip" install -q --disable-pip-version-check "aioquic==$AIOQUIC_VERSION"
installed || { echo "install-aioquic: pin not installed in $venv" >&2; exit 1; }
echo "install-aioquic: aioquic $AIOQUIC_VERSION in $venv"
