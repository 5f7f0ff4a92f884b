"""The masking frontier, replayed over the request's own history: where it
stands, what moves it, the requests as they were forwarded and billed, its
checkpoints between requests, and the re-fetch watch that rides along.
"""
