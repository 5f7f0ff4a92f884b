"""The ``obsmask`` command: the proxy (mitmdump or mitmweb with obsmask
loaded, through ``mitm/tools.py``), ``claude``/``codex``/``run``
(``launch/``), ``report``/``measure`` (``offline/``), ``init`` and
``help``. Above every other room: nothing of the package imports it.

``command_line.py`` is pure, so that ``scripts/proxy.py`` can read its
arguments before the virtual environment with mitmproxy exists.
"""
