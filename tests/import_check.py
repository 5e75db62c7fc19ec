"""The code actions' import check (`tests/lsp/test_lsp_code_actions.py`), run as a script: a plan
(JSON) on stdin, {"originals": {id: [status, seconds]}, "variants": {...}} on stdout."""

import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback

import torch  # noqa: F401 - once, before the forks: each import then costs milliseconds
import torch._dynamo  # noqa: F401 - what `@torch.compile` at import time pulls in (seconds, once)
import torch._inductor.compile_fx  # noqa: F401

from compile_lens.worker import loader

plan = json.load(sys.stdin)
if importlib.util.find_spec("transformers") and any("transformers" in open(job["file"]).read()
                                                   for job in plan["originals"]):
    import transformers.models.gpt2.modeling_gpt2  # noqa: F401 - what the GPT-2 fixtures import (seconds, once)
# the loader's look at every loaded module (which could be a workspace's), once here, not in each child
loader.purge_user_modules(tempfile.gettempdir())


def child(jobs, write_fd):
    """Import each job's file in turn in this one process (as the worker re-imports a file after
    each edit): a line {id, status, seconds} on `write_fd` as each ends."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    for job in jobs:
        started = time.monotonic()
        try:
            loader.import_file(job["file"], job["root"])
            status = "ok"
        except BaseException:  # noqa: BLE001
            with open(job["file"] + ".import-error", "w") as f:
                f.write(traceback.format_exc()[-2000:])
            status = "failed"
        os.write(write_fd, (json.dumps([job["id"], status, time.monotonic() - started]) + "\n").encode())
    os._exit(0)


def next_line(read_fd, pending: bytes, limit_s: float):
    """The child's next line within `limit_s`: (line, what is left) or (None, "timeout" | "failed")."""
    started = time.monotonic()
    while b"\n" not in pending:
        left = limit_s - (time.monotonic() - started)
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            return None, "timeout"
        chunk = os.read(read_fd, 65536)
        if not chunk:  # the child ended without a word on this job
            return None, "failed"
        pending += chunk
    line, rest = pending.split(b"\n", 1)
    return line, rest


def run(jobs, limits):
    """Import `jobs` in order in a forked child, each within its limit; the rest only where the
    first (the original) imports within its own: {id: [status, seconds]}. A job stopped at its
    limit (the child killed) or that ends its child takes the child with it; a fresh one goes on."""
    done, i = {}, 0
    importable = lambda: done[jobs[0]["id"]][0] == "ok" and done[jobs[0]["id"]][1] < limits[0]  # noqa: E731
    while i < len(jobs) and (i == 0 or importable()):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            child(jobs[i:], write_fd)
        os.close(write_fd)
        pending = b""
        while i < len(jobs):
            started = time.monotonic()
            line, pending = next_line(read_fd, pending, limits[i])
            i += 1
            if line is None:
                done[jobs[i - 1]["id"]] = [pending, time.monotonic() - started]
                break
            job_id, status, seconds = json.loads(line)
            done[job_id] = [status, seconds]
            if i == 1 and not importable():
                break
        os.kill(pid, signal.SIGKILL)  # ended or not
        os.waitpid(pid, 0)
        os.close(read_fd)
    return done


# each original file, then (in the same child) its variants: a variant is imported only where its
# original file imports, in time
originals, variants = {}, {}
for original in plan["originals"]:
    mine = [job for job in plan["variants"] if job["original"] == original["file"]]
    done = run([original] + mine, [plan["importable_s"]] + [plan["limit_s"]] * len(mine))
    originals[original["id"]] = done.pop(original["id"])
    variants.update(done)
print(json.dumps({"originals": originals, "variants": variants}))
