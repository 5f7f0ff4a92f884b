"""The rewrite of one request body (parse, index, plan, splice, verify; never
raises), the masker that holds what it keeps between requests, and what the
outcome says.
"""
