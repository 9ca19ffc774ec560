"""`grader bench` and `grader calibrate`: kernels timed against their baselines, and the roofline chart."""
