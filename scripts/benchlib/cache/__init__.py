"""scripts/bench_cache.py: the bill of whole sessions, and the bill so far
after every request, replayed request by request under a prompt cache.

``policies`` (what is compared) -> ``sessions`` (real and ``--input``, in any
wire format; ``formats`` says where a format's requests end), ``synthetic``
and ``adversarial`` (generated; ``text_maker`` writes their text) ->
``tokens`` (an item's tokens) -> ``replay`` (one session's bills under one
policy, under ``model``'s cache and price rules) -> ``figures`` (a session's
ratios, final and so far: ``so_far``; ``parallel`` runs sessions side by
side) -> ``summary`` and ``targets`` (over the sessions) -> ``report`` (JSON
or Markdown); ``run`` calls them in that order.
"""
