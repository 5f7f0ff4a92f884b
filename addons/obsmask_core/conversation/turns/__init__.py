"""The one turn model of a conversation's tool use, built from each of the
three wire formats' lists, and the calls of a turn.
"""
