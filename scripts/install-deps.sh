#!/usr/bin/env bash
# Installs, from Debian's packages, everything the test suite and the benchmarks use:
# the real servers volley manages (nginx, Apache, lighttpd, Caddy), the peers it is
# compared with (wrk, ab, httperf, h2load), litmus and python3-caldav for the WebDAV and
# CalDAV checks, chromium for the HTML report check, nats-server for the injectors' bus,
# openssh-server for the SSH-deployed agents' test hosts, h2spec (Go module) for HTTP/2
# conformance, kubernetes-validate (PyPI, its own venv) for the agent manifests, and
# Radicale and Xandikos (PyPI, /opt/volley-venv) for the managed CalDAV targets, and
# aioquic (PyPI, the same venv) as an outside HTTP/3 client of the built-in server.
# No service is started and nothing running is stopped: volley and the tests start their
# own copies on loopback or in network namespaces, with generated configs.
set -euo pipefail

# The servers volley manages (and their TLS/compression modules) come from one list.
"$(dirname "$0")/install-servers.sh"
"$(dirname "$0")/install-k8s-validate.sh"
# Radicale and Xandikos (the managed CalDAV targets), pinned, in /opt/volley-venv.
"$(dirname "$0")/install-caldav.sh"
"$(dirname "$0")/install-aioquic.sh"

# Toxiproxy: delay and jitter for netlab links where the kernel has no netem (version the Go proxy resolves here).
# The module's server package is cmd/server: built into a scratch GOBIN and installed
# under its usual name.
if ! command -v toxiproxy-server >/dev/null && [ ! -x "$(go env GOPATH)/bin/toxiproxy-server" ]; then
  toxi_bin="$(mktemp -d)"
  GOBIN="$toxi_bin" go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0
  install -D -m 0755 "$toxi_bin/server" "$(go env GOPATH)/bin/toxiproxy-server"
  rm -rf "$toxi_bin"
fi

pkgs=(wrk apache2-utils httperf nghttp2-client
      litmus python3-caldav chromium
      sqlite3 procps iproute2 curl nats-server
      openssh-server)

# h2spec (HTTP/2 conformance, tests/h2spec.rs) is a Go module, pinned.
H2SPEC_VERSION=v2.2.1+incompatible
if ! command -v h2spec >/dev/null 2>&1 && [ ! -x "$(go env GOPATH 2>/dev/null)/bin/h2spec" ]; then
  if command -v go >/dev/null 2>&1; then
    go install "github.com/summerwind/h2spec/cmd/h2spec@${H2SPEC_VERSION}"
  else
    echo "install-deps: go not found, h2spec not installed (tests/h2spec.rs will fail)" >&2
  fi
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

# Package scripts start no daemons while apt runs: install-servers.sh holds policy-rc.d
# (exit 101, "action forbidden") for the whole install. Nothing is stopped afterwards:
# a server the user runs is theirs, and nothing here started one.
"$(dirname "$0")/install-servers.sh" --packages "${missing[@]}"
