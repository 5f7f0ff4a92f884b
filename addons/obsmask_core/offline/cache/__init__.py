"""The replay: a session's requests as its client sends them, through
obsmask's rewrite, read as prompts and billed under each provider's prompt
cache and prices. ``obsmask measure``, ``obsmask report`` and
scripts/bench_cache.py (whose other modules live in scripts/benchlib/cache/)
share it."""
