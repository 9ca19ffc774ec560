"""What the suites compare against, one module per problem: fp64 references and the naive low-precision yardsticks."""

AUDIENCE = "students"   # the public suite compares against these (grader/layout.py)
