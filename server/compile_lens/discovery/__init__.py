"""Source → targets, each with the recipe to call it. Pure `ast`: no torch, no user code.

`targets` finds them, `directives` reads what the user wrote, `inference` guesses inputs from the
source (`values` · `layers` · `bases`: what a class inherits · `follow` · `shapes`), `inputs` settles precedence (directive >
pyproject > recorded > guess), `deps` fingerprints a file and its imports, `call_sites` reads
`torch.compile(...)` calls, `order` the order targets run in (the compiled model first). The entry points are re-exported here.
"""

from .call_sites import compile_call_sites
from .deps import dependency_fingerprint, fingerprint
from .order import MeasureOrder, measure_order, note_importers
from .targets import Discovery, discover

__all__ = ["Discovery", "MeasureOrder", "compile_call_sites", "dependency_fingerprint", "discover", "fingerprint",
           "measure_order", "note_importers"]
