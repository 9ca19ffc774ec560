"""`grader bench` and `grader calibrate`: kernels timed against their baselines, and the roofline chart;
`python -m grader.bench` is the students' `make bench` (student.py)."""

AUDIENCE = "tools"   # make bench ships it; the checking run never imports it (grader/layout.py)
