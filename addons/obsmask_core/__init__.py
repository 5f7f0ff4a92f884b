"""obsmask's code: two features (``conversation``, ``mcp`` with its
``gateway``) on a ``shared`` core, with ``recall`` and ``totals``;
``mitm``, the only part that talks to mitmproxy; ``offline``, recorded
traffic replayed for ``obsmask report`` and ``obsmask measure``;
``launch``, which runs an agent through a proxy of its own; and ``cli``,
the ``obsmask`` command.
Data flows one way: flow -> parse -> decide -> rewrite -> annotate.

Everything is imported as ``obsmask_core.<folder>.<module>``: mitmproxy's
script loader puts ``addons/`` on ``sys.path`` while it loads
``addons/obsmask.py``, and the tests and scripts put the same folder there.
"""
