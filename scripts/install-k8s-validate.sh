#!/usr/bin/env bash
# Installs PyPI's kubernetes-validate (the JSON schemas of every Kubernetes release and a
# checker) into a venv of its own, for the test that validates `volley agents manifest`
# output. A venv of its own so it never fights the other Python tools' pins; the tests
# look for it at $VOLLEY_K8S_VENV (default /opt/volley-venv-k8s).
set -euo pipefail

venv="${VOLLEY_K8S_VENV:-/opt/volley-venv-k8s}"
# The newest release known to carry the 1.30 schemas the test asks for.
pin="kubernetes-validate==1.37.0"

if [ -x "$venv/bin/kubernetes-validate" ] && "$venv/bin/pip" show kubernetes-validate 2>/dev/null | grep -q '^Version: 1.37.0$'; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || [ -w "$(dirname "$venv")" ] || SUDO="sudo"
# Debian's python3 needs python3-venv for `-m venv` (ensurepip).
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
$SUDO /usr/bin/python3 -m venv "$venv"
$SUDO "$venv/bin/pip" install -q --disable-pip-version-check "$pin"
"$venv/bin/kubernetes-validate" --version >/dev/null
