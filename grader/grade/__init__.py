"""`grader grade`: the class runner, one checking run per submission, its sandbox and submission intake."""
