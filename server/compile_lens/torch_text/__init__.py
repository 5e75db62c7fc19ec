"""torch's texts read without torch: whose file a frame is (frames), why a cache missed (cache_keys),
torch's messages with addresses and temp folders out (stable_text), a failed guard in the user's
terms (guard_words). Stdlib only: the worker, the trial's hook inside the user's program, render/
and trace_import/ all import them, so none of them lives in worker/ (the torch process)."""
