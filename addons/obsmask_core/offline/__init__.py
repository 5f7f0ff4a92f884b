"""What the ``obsmask report`` and ``obsmask measure`` commands run, away from
the proxy: recorded traffic (flow files, request bodies) replayed request by
request with and without obsmask, and billed under each price model.

- ``cache/``: the replay (``replay``) of a session's requests as its client
  sends them (``clients``, ``sessions``, ``formats``), read as prompts
  (``prompts``, ``block_tokens``) and billed under the providers' caches and prices
  (``model``); the cache benchmark runs the same code;
- ``measure/``: ``obsmask measure`` (the bill of your own sessions, as text
  or JSON);
- ``report/``: ``obsmask report`` (one HTML page with plots);
- ``recorded_requests``: the requests of a flow file as the client sent them;
- ``proxy_bill``: the proxy's end-of-run bill lines for flow files, one
  for the proxy, the report and measure;
- ``proxy_settings``: the settings the proxy would run with;
- ``commands``: the two commands' command lines;
- ``errors``: OfflineError, bad input that stops a command.

None of it imports mitmproxy: flow files and ``--set`` options are read by
mitm/'s adapters (``recorded_flows``, ``option_values``), imported inside
the functions that read them, so that loading offline/ loads no mitmproxy
(tests/test_layout.py has the rules).
"""
