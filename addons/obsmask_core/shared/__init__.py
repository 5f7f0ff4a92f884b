"""What both features use: settings declared once and mitm.toml, templates,
head + marker + tail, an SSE line splitter, incremental inflate, JSON text
helpers, token counts, the keys of the records in a flow's metadata.

Pure (no mitmproxy); imports no other folder of obsmask_core.
"""
