"""scripts/bench_cache.py: the bill of whole sessions, and the bill so far
after every request, replayed request by request under the providers'
prompt caches.

``policies`` (what is compared) -> ``sessions`` (real and ``--input``, in any
wire format; ``formats`` says where a format's requests end), ``synthetic``,
``adversarial`` and ``cache_edges`` (generated; ``text_maker`` writes their
text) -> ``replay`` (one session under each policy: each request as its
client sends it, ``clients``, through obsmask's rewrite, and the forwarded
body read as a prompt, ``prompts`` with ``tokens``, billed under ``model``'s
caches and prices) -> ``figures`` (a session's ratios, final and so far:
``so_far``; ``parallel`` runs sessions side by side) -> ``summary`` and
``targets`` (over the sessions) -> ``report`` (JSON or Markdown); ``run``
calls them in that order.
"""
