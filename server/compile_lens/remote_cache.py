"""Inductor's remote cache (Redis), as a measurement needs it: which one the user has (a setting,
a flag or their environment), whether it answers, the environment of a child that uses it, and
the environment of a child that must not (the cold compile, cold by construction).

torch reads these variables when its configs are first imported, so they are set on child
processes, never changed in this one. Plain rules, no torch: the settings and the CLI check an
address's form, the server's worker environment (`jobs.lanes.worker_env`) and the benchmark's
children (`worker.measure.compile.cold`) use the same environments.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

# torch's switches (tristate env: "1" on, "0" off, unset: torch's default, which is off outside fbcode)
REMOTE_SWITCHES = ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
                   "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE", "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE")
REDIS_ADDRESS = ("TORCHINDUCTOR_REDIS_URL", "TORCHINDUCTOR_REDIS_HOST", "TORCHINDUCTOR_REDIS_PORT")
# profile-guided dynamic shapes: a profile from an earlier run changes what the cold compile compiles;
# torch keeps no profile without a job id (outside Meta's cluster), so without these there is none
PGO_SWITCHES = ("TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO", "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO",
                "TORCH_COMPILE_JOB_ID", "TORCH_COMPILE_STICKY_PGO_KEY", "TORCH_COMPILE_STICKY_PGO_READ",
                "TORCH_COMPILE_STICKY_PGO_WRITE")
CONNECT_S = 1.0  # torch's Redis client sets no timeout: an address that does not answer is checked first
DEFAULT_PORT = 6379


@dataclass(frozen=True)
class Remote:
    host: str
    port: int
    source: str  # where it came from, for the words: "setting", "environment"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"


def parse(text: str) -> Remote:
    """`redis://HOST:PORT` (port optional) → Remote; ValueError with what is wrong."""
    parts = urlsplit(text.strip())
    if parts.scheme != "redis" or not parts.hostname:
        raise ValueError(f"'{text}' is not a Redis address: write redis://HOST:PORT (e.g. redis://cache.lan:6379)")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError(f"'{text}' has no valid port: write redis://HOST:PORT") from None
    return Remote(parts.hostname, port, "setting")


def from_environment(env: Mapping[str, str]) -> Optional[Remote]:
    """The remote cache the user's environment turns on for torch, or None."""
    if not any(env.get(name) == "1" for name in REMOTE_SWITCHES):
        return None
    if env.get("TORCHINDUCTOR_REDIS_URL"):
        try:
            found = parse(env["TORCHINDUCTOR_REDIS_URL"])
        except ValueError:
            return None  # torch's own client would fail on it too: nothing to measure with
        return Remote(found.host, found.port, "environment")
    port = env.get("TORCHINDUCTOR_REDIS_PORT") or str(DEFAULT_PORT)
    return Remote(env.get("TORCHINDUCTOR_REDIS_HOST") or "localhost", int(port) if port.isdigit() else DEFAULT_PORT,
                  "environment")


def in_use(setting: Optional[str], env: Mapping[str, str]) -> Optional[str]:
    """The address measurements use, as the job and the result-cache key carry it: the setting or
    flag, else the one `env` turns on (the worker's own environment never has it: `cold_env`)."""
    if setting:
        return setting
    found = from_environment(env)
    return found.url if found else None


def resolve(setting: Optional[str], env: Mapping[str, str]) -> tuple[Optional[Remote], Optional[str]]:
    """The remote cache to measure with (the setting or flag first, else the environment) and a
    note when one was asked for but cannot be used."""
    if setting:
        try:
            remote = parse(setting)
        except ValueError as exc:
            return None, f"remote cache: {exc}; measured without it"
    else:
        remote = from_environment(env)
        if remote is None:
            return None, None
    problem = unreachable(remote)
    if problem:
        return None, (f"remote cache: {remote.url} ({remote.source}) {problem}; measured without the remote "
                      "cache (check the address, or that the Redis server runs)")
    return remote, None


def unreachable(remote: Remote, timeout: float = CONNECT_S) -> Optional[str]:
    """Why a TCP connection to the cache fails within `timeout`, or None when it answers."""
    try:
        with socket.create_connection((remote.host, remote.port), timeout=timeout):
            return None
    except socket.timeout:
        return f"did not answer within {timeout:g} s"
    except OSError as exc:
        return f"refused the connection ({exc.strerror or exc})"


def cold_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with every remote cache and PGO profile off, whatever the user set: a cold compile.

    Removed rather than set to "0": torch hashes some of these configs into its cache keys
    (`bundled_autotune_remote_cache` into the FX graph's, functorch's whole config into
    AOTAutograd's), and None ≠ False, so a "0" here would make the warm compile in the worker
    (whose environment `lanes.worker_env` cleans the same way) miss everything the cold one wrote.
    Unset, torch's default is off outside Meta's own builds."""
    return {k: v for k, v in env.items() if k not in REMOTE_SWITCHES + PGO_SWITCHES + REDIS_ADDRESS}


# the caches the warm-remote compile uses; the bundled autotune cache stays off: on the CPU torch
# 2.13 fails the compile with it on (an AssertionError in autotune_cache._get_backend_hash)
SERVED_SWITCHES = REMOTE_SWITCHES[:3]


def remote_env(env: Mapping[str, str], remote: Remote) -> dict[str, str]:
    """`env` with the FX-graph, AOTAutograd and autotune remote caches on, served by `remote`
    (PGO stays off: only the caches are measured)."""
    out = cold_env(env)
    out.update({name: "1" for name in SERVED_SWITCHES})
    out.update(TORCHINDUCTOR_REDIS_HOST=remote.host, TORCHINDUCTOR_REDIS_PORT=str(remote.port))
    return out


# torch's compilation-metrics fields per remote cache (2.13): `<prefix>_hit_count`, `_miss_count`;
# autotune's remote hits are not recorded there
REMOTE_COUNT_FIELDS = {"fx_graph": "inductor_fx_remote_cache", "aot_autograd": "aotautograd_remote_cache"}


def remote_counts(entries: list[Any], device: str) -> Optional[dict[str, Any]]:
    """{fx_graph: {hits, misses}, aot_autograd: {…}, autotune: …} of the compiles in `entries`
    (torch's compilation metrics, or the trial hook's dicts of them), None when none of them
    records a count. Autotune runs only for GPU kernels: "n/a" on the CPU (not 0), None (not
    recorded) on a GPU."""
    def field(entry: Any, name: str) -> Any:
        return entry.get(name) if isinstance(entry, dict) else getattr(entry, name, None)

    counts: dict[str, Any] = {}
    for cache, prefix in REMOTE_COUNT_FIELDS.items():
        hits = [field(e, f"{prefix}_hit_count") for e in entries]
        misses = [field(e, f"{prefix}_miss_count") for e in entries]
        if any(isinstance(v, int) for v in hits + misses):
            counts[cache] = {"hits": sum(v for v in hits if isinstance(v, int)),
                             "misses": sum(v for v in misses if isinstance(v, int))}
    if not counts:
        return None
    counts["autotune"] = "n/a" if device == "cpu" else None
    return counts
