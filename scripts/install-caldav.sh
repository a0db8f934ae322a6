#!/usr/bin/env bash
# Installs the CalDAV servers volley manages (`radicale` and `xandikos` targets) from
# PyPI into one virtual environment, /opt/volley-venv (or $VOLLEY_VENV). A venv because
# Debian's packaged versions lag and pip may not write into the system Python; pinned
# exactly so every run of a study compares the same server code (docs/methodology.md).
#
# Idempotent and quick: when both pins are already installed it only checks and exits.
set -euo pipefail

venv="${VOLLEY_VENV:-/opt/volley-venv}"
# The newest releases PyPI served when these targets were added.
RADICALE_VERSION=3.9.0
XANDIKOS_VERSION=0.4.10

# Asks the venv's own metadata (no pipe into `grep -q`, which under pipefail fails when
# the writer gets SIGPIPE).
installed() {
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - "$RADICALE_VERSION" "$XANDIKOS_VERSION" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version
sys.exit(0 if (version("radicale"), version("xandikos")) == tuple(sys.argv[1:3]) else 1)
PY
}
if installed; then
  echo "install-caldav: radicale $RADICALE_VERSION and xandikos $XANDIKOS_VERSION already in $venv"
  exit 0
fi

# Debian's python3 needs python3-venv for `-m venv` (ensurepip); the same guarded
# package path as the servers (no daemon started by a postinst).
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  "$(dirname "$0")/install-servers.sh" --packages python3-venv
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || [ -w "$(dirname "$venv")" ] || SUDO="sudo"
# Debian's interpreter, not whatever python3 is first on PATH: the venv must outlive a
# user's pyenv or conda switch.
[ -x "$venv/bin/python" ] || $SUDO /usr/bin/python3 -m venv "$venv"
$SUDO "$venv/bin/pip" install -q --disable-pip-version-check \
  "radicale==$RADICALE_VERSION" "xandikos==$XANDIKOS_VERSION"
installed || { echo "install-caldav: pins not installed in $venv" >&2; exit 1; }
echo "install-caldav: radicale $RADICALE_VERSION and xandikos $XANDIKOS_VERSION in $venv"
