"""obsmask: cut the token bill of LLM agents without breaking them.

Load with ``mitmdump -s addons/obsmask.py`` (or mitmweb), or run the
``obsmask`` command of the installed package, which loads this script.
Settings come from ``mitm.toml`` in the current directory and from
``--set obsmask_...`` and ``--set mcpmask_...`` options; see docs/configuration.md.
"""

from obsmask_core.mitm.addons import obsmask_addons

addons = obsmask_addons()
