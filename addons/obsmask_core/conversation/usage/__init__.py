"""The token usage a provider reports in its answer, read from JSON or from a
stream as it passes.
"""
