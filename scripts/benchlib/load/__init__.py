"""scripts/bench_load.py: ``stub`` (the upstream, whose answers are known in
advance), ``bodies`` (the request bodies, made from the real sessions),
``claude_code`` (the Anthropic sessions as Claude Code sends them),
``agents`` (each client's conversations), ``mix`` (the kinds of requests
and the answer each must get), ``cases`` (the clients: load and faults),
``speed`` (the speed figures: CPU per request, latency, stream gaps,
no-load medians, the issue's targets), ``shapes`` (the load phases of one
shape of traffic at a time, and their reuse in process), ``procfs`` (a
process's open TCP sockets, memory and CPU time, from /proc) and
``stream_sse`` (the addon that makes plain mitmproxy stream event streams)."""
