"""Recall: the model gets back any result obsmask masked or cut, through a
``recall`` tool served by the proxy itself (an MCP server at
``/obsmask/mcp``), and the store that keeps the whole of every cut MCP
string.

Pure (no mitmproxy); imports only ``shared``.
"""
