"""Signatures of the lecture's classic mistakes, one module per problem (used with grader.diagnose)."""

AUDIENCE = "students"   # the public suite's messages quote these (grader/layout.py)
