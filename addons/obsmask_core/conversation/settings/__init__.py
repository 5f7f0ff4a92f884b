"""The settings of conversation masking (the policy) and which requests are
conversations (the routes), each declared once.
"""
