"""`grader bench` and `grader calibrate`: kernels timed against their baselines, and the roofline chart."""

AUDIENCE = "staff"   # staff tooling; the checking run never imports it (grader/layout.py)
