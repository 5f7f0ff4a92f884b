"""``obsmask measure`` (scripts/measure.py): what obsmask does to the bill of your own sessions.

- the settings in force are ``obsmask_core.offline.proxy_settings``'s, taken as the
  proxy takes them (defaults, the settings file and its profile, ``--set``),
  the same reader as report.py's;
- ``inputs``: the requests of the inputs (flow files, request bodies), as
  the client sent them, with what the recording says of each;
- ``conversations``: those requests grouped into conversations, each a
  session the cache benchmark's replay bills;
- ``bill``: one conversation replayed with and without obsmask;
- ``usage``: the provider's own figures, in the same terms for every format;
- ``comparison``: those figures next to the replay's estimate, request by request;
- ``figures``: the bills and tokens per conversation and in total;
- ``document`` and ``text``: the JSON document and the text report;
- ``run``: all of it, in order.
"""
