"""The library of the benchmark scripts (scripts/bench_*.py are its entry points).

- ``mitmdump``: a real mitmdump with obsmask on 127.0.0.1, started and
  stopped; the end-to-end tests use it too (tests/support/processes.py);
- ``timing``: medians of timed runs;
- ``flows``: the requests of a mitmproxy flow file, as the client sent them
  (a masked flow's backup);
- ``errors``: BenchError, bad input that stops a benchmark;
- ``proxy_settings``: the masking settings as the proxy takes them
  (defaults, settings file, profile, ``--set``), for measure/ and report/;
- ``cache/``: scripts/bench_cache.py;
- ``load/``: scripts/bench_load.py;
- ``hooks/``: scripts/bench_hooks.py (obsmask's addons with every hook timed);
- ``one_request/``: scripts/bench_observation_masking_schema1.py;
- ``mcp_truncation/``: scripts/bench_mcp_truncation.py;
- ``measure/``: scripts/measure.py (your own sessions, with your settings);
- ``report/``: scripts/report.py (one HTML page with plots, from flow files).

Modules that import obsmask_core need addons/ on sys.path: the entry
scripts put it there, as pyproject.toml does for the tests.
"""
