"""`python -m compile_lens.record [-q] [--root DIR] [-o FILE] -- COMMAND ARGS`: same as `compile-lens record`."""

import argparse
import sys

from ..cli.record import add_record_parser


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compile_lens.record")
    add_record_parser(parser.add_subparsers(dest="subcommand"))
    args = parser.parse_args(["record", *(sys.argv[1:] if argv is None else argv)])
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
