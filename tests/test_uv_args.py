"""`make setup`'s uv installs from where pip's configuration says (scripts/uv_args.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "scripts" / "uv_args.py"


def _uv_args():
    spec = importlib.util.spec_from_file_location("uv_args", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.uv_args


def test_pip_config_list_becomes_uv_flags_one_per_value():
    lines = ["global.cert='/etc/ssl/certs/ca.crt'", "global.constraint='/etc/xdg/pip/constraints.txt'",
             "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
             "global.find-links='/opt/wheels'", ":env:.find-links='/srv/wheels'", "download.index-url='https://x'"]
    assert _uv_args()(lines) == [
        "--index-strategy", "unsafe-best-match", "--constraint", "/etc/xdg/pip/constraints.txt",
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/srv/wheels"]  # the environment's setting wins; `pip download`'s section is not install's


def test_no_pip_configuration_is_uvs_defaults():
    assert _uv_args()([]) == ["--index-strategy", "unsafe-best-match"]
