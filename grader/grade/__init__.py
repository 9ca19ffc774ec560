"""`grader grade`: the class runner, one checking run per submission, its sandbox and submission intake."""

AUDIENCE = "staff"   # runs around checking runs, never inside one (grader/layout.py)
