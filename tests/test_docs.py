"""The docs say what is there: every flag of every subcommand (read from the argparse parsers in
cli/) in its row of docs/cli.md, every package.json setting in docs/settings.md, every page in the
site's nav; and the README stays a landing page. A failure names what is missing and where it goes.
(`mkdocs build --strict`, in `make test` as `make docs`, checks the links and anchors.)"""

from __future__ import annotations

import argparse
import json
import re

from compile_lens.cli.main import build_parser
from paths import REPO

DOCS = REPO / "docs"
CLI_PAGE = DOCS / "cli.md"
SETTINGS_PAGE = DOCS / "settings.md"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """Each option's long spelling (`-o, --output` → `--output`); --help left out."""
    return [max(a.option_strings, key=len) for a in parser._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)]


def _sections(text: str) -> dict[str, str]:
    """docs/cli.md's `## compile-lens NAME` sections, by NAME."""
    parts = re.split(r"^## compile-lens (\S+)\s*$", text, flags=re.M)
    return {name: body.split("\n## ", 1)[0] for name, body in zip(parts[1::2], parts[2::2])}


def _table_rows(section: str) -> str:
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def missing_flags(text: str, subcommands: dict[str, argparse.ArgumentParser]) -> list[str]:
    sections = _sections(text)
    found = []
    for name, parser in subcommands.items():
        if name not in sections:
            found.append(f"`compile-lens {name}` has no section in docs/cli.md: add `## compile-lens {name}` "
                         f"with a row per flag")
            continue
        rows = _table_rows(sections[name])
        for flag in _flags(parser):
            if not re.search(rf"`{re.escape(flag)}(?![\w-])", rows):
                found.append(f"`compile-lens {name} {flag}` is missing from docs/cli.md: add a row for it to the "
                             f"flag table of the `## compile-lens {name}` section")
    return found


def _settings() -> list[str]:
    package = json.loads((REPO / "package.json").read_text(encoding="utf-8"))
    return list(package["contributes"]["configuration"]["properties"])


def missing_settings(text: str, keys: list[str]) -> list[str]:
    rows = _table_rows(text)
    return [f"setting `{key}` (package.json) is missing from docs/settings.md: add a row for it to the table"
            for key in keys if not re.search(rf"`{re.escape(key)}`", rows)]


def test_every_cli_flag_is_in_docs_cli():
    assert missing_flags(CLI_PAGE.read_text(encoding="utf-8"), _subcommands()) == []


def test_every_setting_is_in_docs_settings():
    assert missing_settings(SETTINGS_PAGE.read_text(encoding="utf-8"), _settings()) == []


def test_the_checks_name_what_is_missing_and_where():
    """A flag or setting added without its docs line is named, with the file and section for it."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    check = sub.add_parser("check")
    check.add_argument("--levers", action="store_true")
    check.add_argument("-o", "--output")
    page = "## compile-lens check\n\n| Flag | What |\n|---|---|\n| `-o FILE`, `--output FILE` | where |\n"
    assert missing_flags(page, dict(sub.choices)) == [
        "`compile-lens check --levers` is missing from docs/cli.md: add a row for it to the flag table of the "
        "`## compile-lens check` section"]
    # a mention in prose or in another section is not a row of the table
    assert missing_flags(page + "Use `--levers` for levers.\n## compile-lens trial\n| `--levers` | x |\n",
                         {"check": check}) != []
    assert missing_flags(page.replace("`-o FILE`, `--output FILE`", "`--output-dir`"), {"check": check})[1:] == [
        "`compile-lens check --output` is missing from docs/cli.md: add a row for it to the flag table of the "
        "`## compile-lens check` section"]
    assert missing_settings("| `compileLens.device` | auto | x |\n", ["compileLens.device", "compileLens.line.cost"]) == [
        "setting `compileLens.line.cost` (package.json) is missing from docs/settings.md: add a row for it to the table"]


def test_every_page_is_in_the_sites_nav():
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert [p for p in pages if not re.search(rf":\s*{re.escape(p)}\s*$", nav, re.M)] == []


def test_the_readme_is_a_landing_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= 250
    assert any(re.match(r"!\[.+\]\(docs/images/\S+\.png\)", line) for line in lines[:40])  # a picture up front
    assert "make demo    #" in readme and "make test    #" in readme  # the two commands, as CI runs them
    for link in re.findall(r"\]\(((?:docs/)[^)#]+)", readme):
        assert (REPO / link).exists(), f"README links to {link}, which does not exist"
