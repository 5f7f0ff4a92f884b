"""The replay: a session's requests as its client sends them, through
obsmask's rewrite, read as prompts and billed under each provider's prompt
cache and prices. ``obsmask measure``, ``obsmask report`` and
the cache benchmark (in scripts/) share it."""
