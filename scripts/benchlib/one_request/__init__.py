"""scripts/bench_observation_masking_schema1.py: what masking saves and
costs on one request; and scripts/bench_rewrite.py's sessions and figures.

``inputs`` (the bodies and their wire format) -> ``measure`` (one body
masked and timed) -> ``report`` (the totals, JSON or text).

bench_rewrite: ``shapes`` (every request of a session, per shape of
traffic: chat, anthropic, responses, and claude_code as Claude Code sends
it) -> ``rewrite_report`` (one body's figures, the ratios over orjson per
shape and issue 43's targets).
"""
