"""``obsmask claude``, ``obsmask codex`` and ``obsmask run``: the proxy
started for one run of an agent, the agent pointed at it, the run's saving
printed when the agent exits.

The proxy is a child process (the ``obsmask`` command's own proxy, loaded
as it always is) and the agent another, which keeps the terminal; nothing
here imports mitmproxy.

- ``upstream.py``: where the agent's traffic goes, split into what the
  reverse proxy forwards to and the path the agent keeps;
- ``agents.py``: what every launched program shares (its base-URL variable,
  the loopback exempt from the user's proxy); ``claude_code.py`` and
  ``codex.py``: each agent's upstream, options and recall registration;
- ``proxy_process.py``: the proxy started (and stopped with obsmask even
  when it is killed), waited for, stopped, its summary read back;
- ``foreground.py``: the agent on the terminal and the signals around it;
- ``command.py``: the command line and the run from start to exit status.
"""
