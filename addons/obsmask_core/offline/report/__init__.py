"""``obsmask report`` (scripts/report.py): one self-contained HTML page with pictures of what
obsmask did to the flows of .mitm files.

``flow_file`` (the flows, read by ``mitm/recorded_flows``) -> ``conversations`` (the
requests grouped by conversation, bodies read as their wire format) ->
``policy_choice`` (the policy each conversation is replayed under) ->
``request_numbers`` (tokens by ``estimates``, provider usage, obsmask's
record per request), ``replayed_plans`` (the frontier the policy gives, and
whether it matches what was sent), ``bills`` (the bill so far under each
price model, by the cache benchmark's replay) and ``cut_answers`` -> ``figures``
and ``totals_section`` (pure: plots and tables from numbers) -> ``svg`` (the plots,
drawn as inline SVG) -> ``html_page`` (the page); ``run`` calls them in that
order.
"""
