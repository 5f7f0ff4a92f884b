"""The mitmproxy adapters: one addon per job (``addons.py`` lists the eight
in the order they run: the settings file, recall, conversation masking,
the provider's brake, the MCP gateway, MCP truncation, the run's totals
and the content view), option registration derived from the settings
classes, and what is left on a flow; and the adapters the rest of the
package reaches mitmproxy through: flow files read into plain records
(``recorded_flows.py``), the proxy's options parsed for the offline
commands (``option_values.py``), mitmproxy's own tools (``tools.py``).

The only folder that imports mitmproxy; it imports the features and
``shared/``, never the rooms above it (offline/, launch/, cli/).
"""
