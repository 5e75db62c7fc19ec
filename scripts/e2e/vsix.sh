#!/usr/bin/env bash
# Builds dist/compile-lens-<version>.vsix, offline apart from PyPI and the npm registry:
#   1. npm ci (when node_modules is missing or older than package-lock.json),
#   2. esbuild bundles the client into dist/extension.js,
#   3. bundled/tool gets a copy of server/compile_lens, bundled/libs the server's pure-Python
#      dependencies (pip --target; psutil as the linux-x86_64 wheel),
#   4. vsce packs it (no node_modules: .vscodeignore lists what ships).
# Prints the path of the .vsix as its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

PYTHON="${COMPILE_LENS_PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3
# The server's runtime dependencies, pinned with their whole closure so every build ships the
# same files. exceptiongroup is cattrs' backport for Python 3.10 (pip would leave it out when the
# building Python is 3.11+); it is unused on newer Pythons. psutil is the one native package:
# its linux x86_64 abi3 wheel works on any CPython 3.x there; elsewhere see the README.
SERVER_LIBS=(pygls==2.1.1 lsprotocol==2025.0.0 psutil==7.2.2
  attrs==26.1.0 cattrs==26.2.1 typing_extensions==4.16.0 exceptiongroup==1.3.0)

log() { echo "vsix: $*" >&2; }

if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error >&2
fi

log "esbuild -> dist/extension.js"
rm -rf dist/extension.js dist/extension.js.map
node extension/esbuild.mjs --production

# COMPILE_LENS_SERVER_DIR: another copy of the package to bundle (for trying the client alone).
SERVER_DIR="${COMPILE_LENS_SERVER_DIR:-$ROOT/server/compile_lens}"
log "bundled/tool <- $SERVER_DIR"
[[ -f "$SERVER_DIR/__init__.py" ]] || { log "$SERVER_DIR is missing"; exit 1; }
rm -rf bundled/tool
mkdir -p bundled/tool
cp -R "$SERVER_DIR" bundled/tool/compile_lens
find bundled/tool -name __pycache__ -type d -prune -exec rm -rf {} +

stamp="${SERVER_LIBS[*]}"
if [[ "$(cat bundled/libs/.requirements 2>/dev/null)" != "$stamp" ]]; then
  log "bundled/libs <- pip install ${SERVER_LIBS[*]}"
  rm -rf bundled/libs
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile \
    --only-binary=:all: --target bundled/libs "${SERVER_LIBS[@]}" 2>&1 \
    | grep -v "^WARNING: Location .* is ignored" >&2 || true
  [[ -d bundled/libs/pygls && -d bundled/libs/psutil ]] || { log "pip install failed"; exit 1; }
  rm -rf bundled/libs/bin
  echo "$stamp" > bundled/libs/.requirements
fi

version=$(node -p "require('./package.json').version")
name=$(node -p "require('./package.json').name")
out="dist/$name-$version.vsix"
log "vsce package -> $out"
rm -f "$out"
npx --no-install vsce package --no-dependencies --allow-missing-repository --out "$out" >&2
echo "$ROOT/$out"
