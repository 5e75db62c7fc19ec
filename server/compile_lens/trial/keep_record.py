"""After a trial: the eager run's record (what `compile-lens record` would have written) merged into
the workspace's `<root>/.compile-lens/recorded.json`, so `check`, `report` and the editor trace the
program's modules with the inputs the trial saw. The eager run's, because its calls are the
program's own (the compiled run's record is the same program under our compile). Stdlib only.
"""

from __future__ import annotations

import os
from typing import Optional

from ..record import store


def keep(scratch: str, root: str, name: str = "eager") -> Optional[tuple[str, list[str]]]:
    """Merge the run `name`'s record (`runner.run_once` writes `recorded-<name>.json` in `scratch`)
    into the workspace's; (the file written, the targets merged), or None when the run recorded nothing."""
    targets = store.read(os.path.join(scratch, f"recorded-{name}.json"))
    if not targets:
        return None
    path = store.default_path(root)
    try:
        store.merge_write(path, targets)
    except OSError:
        return None
    return path, sorted(targets)
