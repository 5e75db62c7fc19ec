"""The `# compile-lens:` comment grammar, in one place for discovery, findings and code actions.

`# compile-lens: init=Net(4), inputs=(torch.randn(8, 4),)` tells how to build and call a target;
`# compile-lens: ignore` (or `ignore[CL101, GB0124]`) hides the findings on its line.
"""

from __future__ import annotations

import re
from typing import Optional

DIRECTIVE = re.compile(r"#\s*compile-lens:\s*(?P<body>.*)$")
IGNORE = re.compile(r"^ignore\b")  # a directive body that is an ignore, not a recipe
DIRECTIVE_START = re.compile(r"#\s*compile-lens:")
IGNORE_COMMENT = re.compile(r"#\s*compile-lens:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")


def directive_at(line_text: str) -> Optional[str]:
    """The body of a recipe directive on this line (not an ignore), or None."""
    match = DIRECTIVE.search(line_text)
    if not match:
        return None
    body = match["body"].strip()
    return None if IGNORE.match(body) else body
