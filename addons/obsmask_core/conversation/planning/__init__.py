"""Which results one request masks, and why the others stay: the rules on a
result alone, the masking frontier replayed over the request's history, its
checkpoints, and the re-fetch watch.
"""
