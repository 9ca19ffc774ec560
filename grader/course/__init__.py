"""Course operations around a batch: the course file and late policy, the Gradescope autograder and
upload, the LMS roster and Canvas export, the similarity check and the speed leaderboard. Staff only:
nothing here ships to students or takes part in a checking run."""

AUDIENCE = "staff"
