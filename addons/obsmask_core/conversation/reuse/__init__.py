"""The fast path: the conversation's previous request, kept so that the next
one, which only adds items to it, is read and masked from it.
"""
