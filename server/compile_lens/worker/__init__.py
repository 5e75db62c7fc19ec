"""The torch side: runs in its own process, imports torch once, never imports pygls."""
