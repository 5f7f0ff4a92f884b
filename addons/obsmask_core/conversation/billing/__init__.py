"""What the provider bills: price models, the prompt cache's breakpoints, the
ledger of a conversation's bill with masking and without, and when
conversations were last seen.
"""
