"""Issue 24.6: a real install. The wheel `pip` builds from this repository, installed into a fresh
virtual environment outside it (torch and the other dependencies reused from this one through a
`.pth` line, not downloaded again), gives a working `compile-lens` with docs/codes.md inside the
package: the help texts and the codes' links work without the repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_installs_and_checks_outside_the_repository(tmp_path):
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(dist)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("compile_lens-*.whl")
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    # torch, pygls, psutil from this environment: appended to sys.path after the fresh site-packages,
    # so the installed compile_lens wins over this checkout's editable one
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "reuse_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "examples" / "item_scale.py", project / "item_scale.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COMPILE_LENS_CACHE_DIR"] = str(tmp_path / "cache")
    where = subprocess.run([str(python), "-c", "import compile_lens, compile_lens.codes as c; "
                            "print(compile_lens.__file__); print(c.href('CL101')); print(c.doc_section('CL101'))"],
                           cwd=project, capture_output=True, text=True, env=env, timeout=60)
    module, href, section = where.stdout.split("\n", 2)
    assert module.startswith(str(fresh)), module
    assert href.startswith((fresh / "lib").as_uri()) and href.endswith("/compile_lens/docs/codes.md#cl101"), href
    assert section.startswith("### CL101")

    done = subprocess.run([str(fresh / "bin" / "compile-lens"), "check", "item_scale.py", "--no-benchmark",
                           "--no-recompiles", "--format", "sarif", "-q"], cwd=project, capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 1, done.stderr  # the example's .item() break
    run = json.loads(done.stdout)["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["GB0124"]
    assert all("file://" not in rule.get("helpUri", "") for rule in run["tool"]["driver"]["rules"])
