"""Pure rendering: results in, LSP types or CLI text/JSON/SARIF out. No torch, no pygls here."""
