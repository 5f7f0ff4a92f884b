"""``obsmask claude``, ``obsmask codex`` and ``obsmask run``: the proxy
started for one run of an agent, the agent pointed at it, the run's saving
printed when the agent exits.

The proxy is a child process (the ``obsmask`` command's own proxy, loaded
as it always is) and the agent another, which keeps the terminal; nothing
here imports mitmproxy.

- ``upstream.py``: where the agent's traffic goes, split into what the
  reverse proxy forwards to and the path the agent keeps;
- ``agents.py``: each agent's program, its base-URL variable or option,
  its recall registration for one run;
- ``proxy_process.py``: the proxy started, waited for, stopped, its summary
  read back;
- ``command.py``: the command line and the run from start to exit code.
"""
