"""obsmask's code, shared by the mitmproxy addons, the tests and the scripts.

Modules that import nothing from mitmproxy (the pure part): ``policy``,
``tool_turns``, ``wire_formats``, ``error_heuristic``, ``masking``,
``json_spans``, ``request_body``, ``tokens``, ``toml_config``. The addon classes live in the
modules whose name ends in ``_addon``.

Everything is imported as ``obsmask_core.<module>``: mitmproxy's script loader
puts ``addons/`` on ``sys.path`` while it loads ``addons/obsmask.py``, and the
tests and scripts put the same folder there, so each module exists once.
"""
