#!/usr/bin/env bash
# Builds dist/compile-lens-<version>.vsix, offline apart from PyPI and the npm registry:
#   1. npm ci (when node_modules is missing or older than package-lock.json),
#   2. esbuild bundles the client into dist/extension.js,
#   3. bundled/tool gets a copy of server/compile_lens, bundled/libs the server's pure-Python
#      dependencies, bundled/native/linux-x64 psutil (pip --target, wheels only),
#   4. vsce packs it (no node_modules: .vscodeignore lists what ships).
# Prints the path of the .vsix as its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

PYTHON="${COMPILE_LENS_PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3
# The server's runtime dependencies, pinned with their whole closure so every build ships the
# same files. exceptiongroup is cattrs' backport for Python 3.10 (pip would leave it out when the
# building Python is 3.11+); it is unused on newer Pythons.
PURE_LIBS=(pygls==2.1.1 lsprotocol==2025.0.0 attrs==26.1.0 cattrs==26.2.1
  typing_extensions==4.16.0 exceptiongroup==1.3.0)
# psutil is the one native package: its linux x86_64 abi3 wheel (any CPython 3) goes into
# bundled/native/linux-x64, which the client puts on PYTHONPATH only on linux-x64 hosts; elsewhere
# the interpreter's own psutil is used.
NATIVE_LIBS=(psutil==7.2.2)
NATIVE_PLATFORM=linux-x64
NATIVE_PIP_PLATFORM=manylinux2014_x86_64

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
# the codes' documentation, which diagnostics link to (compile_lens/codes.py looks for it here)
mkdir -p bundled/tool/compile_lens/docs && cp "$ROOT/docs/codes.md" bundled/tool/compile_lens/docs/
find bundled/tool -name __pycache__ -type d -prune -exec rm -rf {} +

pip_install() { # target, pip args...
  local target=$1
  shift
  rm -rf "$target"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
    --only-binary=:all: --target "$target" "$@" 2>&1 \
    | grep -v "^WARNING: Location .* is ignored" >&2 || true
  rm -rf "$target/bin"
}

stamp="${PURE_LIBS[*]} | ${NATIVE_LIBS[*]} $NATIVE_PIP_PLATFORM"
if [[ "$(cat bundled/.requirements 2>/dev/null)" != "$stamp" ]]; then
  log "bundled/libs <- pip install ${PURE_LIBS[*]}"
  pip_install bundled/libs "${PURE_LIBS[@]}"
  log "bundled/native/$NATIVE_PLATFORM <- pip install ${NATIVE_LIBS[*]} ($NATIVE_PIP_PLATFORM)"
  pip_install "bundled/native/$NATIVE_PLATFORM" --platform "$NATIVE_PIP_PLATFORM" "${NATIVE_LIBS[@]}"
  [[ -d bundled/libs/pygls && -d bundled/native/$NATIVE_PLATFORM/psutil ]] || {
    log "pip install failed"
    exit 1
  }
  echo "$stamp" > bundled/.requirements
fi

# The bundle alone must be enough to start the server: import it with no site-packages at all.
log "smoke: import compile_lens.lsp.app from the bundle alone (python -S)"
PYTHONSAFEPATH=1 PYTHONPATH="bundled/tool:bundled/libs:bundled/native/$NATIVE_PLATFORM" \
  "$PYTHON" -S -c "import compile_lens.lsp.app, sys; assert 'torch' not in sys.modules" >&2

version=$(node -p "require('./package.json').version")
name=$(node -p "require('./package.json').name")
out="dist/$name-$version.vsix"
log "vsce package -> $out"
rm -f "$out"
# The extension's own README (the repository's links images relatively, which vsce rejects
# without a repository URL).
npx --no-install vsce package --no-dependencies --allow-missing-repository \
  --readme-path extension/README.md --out "$out" >&2
echo "$ROOT/$out"
