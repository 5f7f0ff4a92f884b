"""The mitmproxy adapters: one addon per job (``addons.py`` lists the eight
in the order they run: the settings file, recall, conversation masking,
the provider's brake, the MCP gateway, MCP truncation, the run's totals
and the content view), option registration derived from the settings
classes, and what is left on a flow.

The only folder that imports mitmproxy; it may import every other folder.
"""
