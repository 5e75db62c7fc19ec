"""`python -m compile_lens.worker.template FD`: one process that imports torch once and forks workers.

A worker's start is mostly torch's and Dynamo's import (≈ 3 s of a core, BENCHMARKS.md); a server
that starts several (its trace and deep lanes, a replacement after a crash, a timeout or a cancelled
job) pays it once here, and a new worker is ready in tens of milliseconds. Linux only: the server
starts workers directly elsewhere (`jobs/template.py`).

The server speaks on the SOCK_SEQPACKET socket FD, one JSON message per packet. It asks with
`{"cwd", "env"}` and three descriptors (the new worker's stdin, stdout, stderr); the template answers
`{"pid"}` (or `{"error"}`), in the order asked, and `{"exit": pid, "code"}` when it reaps one (the
workers are its children, so their exit status is read here). The first message is `{"ready":
import_s}`, or `{"error"}` when torch cannot be imported (the server then starts the worker directly,
which says so in its own words).

Nothing here touches CUDA or runs user code: a fork after CUDA's initialisation is broken, and each
worker must start as fresh as a new process (`main` of `__main__`, its own environment and folder).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
import warnings

from .. import processes

NAME = "lens-template"  # its process name (/proc/PID/comm) in ps, top and the tests; its workers take theirs back
MAX_MESSAGE = 1 << 20  # an environment is a few kB; a packet larger than this is cut


def _send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message, separators=(",", ":")).encode())


def _set_name(name: str) -> None:
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(name)
    except OSError:
        pass


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _become_worker(request: dict, fds: list[int], sock: socket.socket, wake: tuple[int, int], name: str,
                   import_s: float, template: int) -> None:
    """In the forked child: the worker's descriptors, session, folder and environment, then its main.
    Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        os.setsid()  # as `start_new_session`: killed as one group, never by the editor's ^C
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _set_name(name)
        processes.FORKED_FROM = template  # not getppid(): the template may be gone already (then it exits at once)
        numpy = sys.modules.get("numpy")  # imported with torch, seeded once: each worker its own seed, as a new process
        if numpy is not None:
            numpy.random.seed()
        from . import __main__ as worker_main
        sys.argv = [worker_main.__file__]  # what user code sees, as in a worker started directly
        worker_main.main(import_s=import_s)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        # an interpreter's own exit, without unwinding into the template's loop: atexit's handlers
        # (Inductor's compile pool), then the output flushed
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve(sock: socket.socket, import_s: float, own_name: str) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)  # SIGCHLD wakes the select: exits are reported as they happen
    signal.signal(signal.SIGCHLD, lambda *_: None)
    me = os.getpid()
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock)
        if sock not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
        except OSError:
            return
        if not data:
            return  # the server closed its end (its end, or its own)
        try:
            request = json.loads(data)
            if len(fds) != 3:
                raise ValueError(f"3 descriptors expected, {len(fds)} came")
            with warnings.catch_warnings():  # 3.12's "multi-threaded fork" warning: torch's idle pool only
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except (ValueError, OSError) as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        if pid == 0:
            _become_worker(request, fds, sock, (wake_r, wake_w), own_name, import_s, me)
        for fd in fds:
            os.close(fd)
        _send(sock, {"pid": pid})


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    with open("/proc/self/comm") as f:
        own_name = f.read().strip()
    _set_name(NAME)  # from the start: never taken for a worker, even while it imports
    named = os.environ.get("COMPILE_LENS_SERVER_PID", "")
    processes.watch_parent(int(named) if named.isdigit() else None)
    started = time.perf_counter()
    try:
        from . import jobs  # noqa: F401 - the import every worker would pay: torch, Dynamo, ours
    except ImportError as exc:
        _send(sock, {"error": f"cannot import torch: {exc}"})
        return
    torch = sys.modules["torch"]
    if torch.cuda.is_initialized():  # a fork would inherit a CUDA context it cannot use
        _send(sock, {"error": "CUDA was initialised at import: workers start on their own"})
        return
    if threading.active_count() > 1 + 1:  # ours: the parent watch; another is a thread fork would lose
        _send(sock, {"error": f"threads started at import: {[t.name for t in threading.enumerate()]}"})
        return
    import_s = round(time.perf_counter() - started, 3)
    _send(sock, {"ready": import_s})
    _serve(sock, import_s, own_name)


if __name__ == "__main__":
    main()
