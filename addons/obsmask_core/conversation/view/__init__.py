"""What masking did to each result of one request, and why: the facts the
content view shows.
"""
