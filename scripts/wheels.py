"""Pack the project's pure-Python dependencies, as installed in this venv, into wheels a GPU box
can install without a network: `python scripts/wheels.py [DIR]` (default build/wheels; `make wheels`).

A GPU box holds torch but not pygls/lsprotocol/cattrs/attrs; `pip download` needs an index the box
cannot reach, and `pip wheel NAME==VERSION` would fetch the sdist. So each wheel is rebuilt from the
installed files themselves (its RECORD), which a wheel is: the files plus their dist-info.
scripts/gpu-check installs them with `pip install --no-index --find-links DIR --target TMP`.
"""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile
from importlib import metadata
from pathlib import Path

PURE = ("pygls", "lsprotocol", "cattrs", "attrs", "typing_extensions")


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pack(name: str, out: Path) -> Path:
    dist = metadata.distribution(name)
    norm = dist.metadata["Name"].replace("-", "_")
    wheel = out / f"{norm}-{dist.version}-py3-none-any.whl"
    records = []
    info = None
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for f in dist.files or []:
            path = Path(dist.locate_file(f))
            rel = str(f).replace("\\", "/")
            if rel.endswith(".pyc") or "__pycache__" in rel or rel.startswith("..") or not path.is_file():
                continue
            if rel.endswith(".dist-info/RECORD"):
                info = rel
                continue
            if rel.endswith(("INSTALLER", "REQUESTED", "direct_url.json")) and ".dist-info/" in rel:
                continue
            data = path.read_bytes()
            z.writestr(rel, data)
            records.append(f"{rel},{_hash(data)},{len(data)}")
        if info is None:
            raise SystemExit(f"{name}: no RECORD in its dist-info")
        records.append(f"{info},,")
        z.writestr(info, "\n".join(records) + "\n")
    return wheel


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "build/wheels")
    out.mkdir(parents=True, exist_ok=True)
    for name in PURE:
        try:
            print(pack(name, out))
        except metadata.PackageNotFoundError:
            print(f"{name}: not installed here; skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
