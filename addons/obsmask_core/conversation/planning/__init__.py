"""Which results one request masks, and why the others stay: the rules on a
result alone, the plan's stages (masking past the frontier, then clipping),
and what a plan keeps between requests or takes from the previous one.
"""
