"""The language server (pygls): documents in, diagnostics, lenses, hints and hovers out. No torch here."""
