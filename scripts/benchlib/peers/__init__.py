"""scripts/bench_peers.py: the shared sessions sent request by request through
no proxy, obsmask (a real mitmdump with the shipped settings) and Headroom
(in its cache and token modes), against one recording upstream on
127.0.0.1; what each proxy forwarded is billed under bench_cache's cache
models and compared with what the client sent.

- ``upstream``: the recording upstream (answers each format, keeps every body);
- ``answers``: the answers it gives;
- ``wire``: per wire format, the route, the headers and where tool results are;
- ``proxies``: the proxies under test, started and stopped by their pid;
- ``headroom``: Headroom's own virtual environment and command line;
- ``client``: sends the recorded bodies and times them;
- ``changes``: what a proxy changed outside tool-result contents;
- ``stability``: tool results whose bytes change from one request to the next;
- ``billing``: the forwarded bodies billed under the cache models;
- ``run`` and ``report``: the run, its JSON and its tables.
"""
