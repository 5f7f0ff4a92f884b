"""The request body read for masking, quickly or exactly, and the bytes of the
values a plan replaces found in it; the splice that writes them back.
"""
