"""Signatures of the lecture's classic mistakes, one module per problem (used with grader.diagnose)."""
