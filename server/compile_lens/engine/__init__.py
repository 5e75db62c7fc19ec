"""The batch analysis the three front ends share: files in, typed reports out. `check` runs one file
after another through the same sequence (targets → cache → trace → measure → levers → findings) on
one worker at a time; the CLI renders its `Checked` as text, JSON or SARIF, the MCP server returns
its JSON document, `show` reads one target of it. Progress goes to a callback, never to a stream.
The language server runs the same phases per document, interactively (`lsp/scheduler.py`), on the
same cache reads and writes (`cached`) and the same traced findings (`findings.traced_part`)."""
