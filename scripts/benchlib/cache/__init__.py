"""scripts/bench_cache.py: the bill of whole sessions, and the bill so far
after every request, replayed request by request under each model family's
prompt cache and prices.

``policies`` (what is compared) -> ``sessions`` (real and ``--input``, in any
wire format; ``formats`` says where a format's requests end), ``claude_code``
(the real Anthropic sessions as Claude Code sends them), ``synthetic``,
``adversarial`` and ``cache_edges`` (generated; ``text_maker`` writes their
text) -> ``family_replay`` (one session under each family of its format and
each policy: each request as its client sends it to the family's model,
``clients``, through obsmask's rewrite, and the forwarded body read as a
prompt, ``prompts`` with ``tokens``, billed per ``families`` line under
``model``'s caches) -> ``family_figures`` (a session's ratios, final and so
far: ``so_far``; ``parallel`` runs sessions side by side) -> ``summary`` and
``targets`` (over the sessions) -> ``report`` (JSON or Markdown); ``run``
calls them in that order. ``pauses`` makes copies of the real and Claude
Code-shaped sessions with long gaps between requests, replayed in the same
pool under the shipped settings with and without cold turns, summed up
apart (``pause_report``). (``figures`` and ``replay`` keep the figures per
price model of the ``price_model`` setting, for ``obsmask measure``.)
"""
