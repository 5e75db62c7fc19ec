"""`python -m compile_lens.cli ARGS`: the same as the `compile-lens` command."""

import sys

from .main import main

if __name__ == "__main__":
    sys.exit(main())
