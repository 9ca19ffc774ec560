"""Perf checks: timing a submission against its baseline, and what keeps that timing honest and quiet.

`timing` is the measurement (in the worker, the checker's rounds, the wall window, the record),
`gpu_lock` gives a perf check its GPU alone among submissions sharing it, `pausing` stops the worker
while the baseline is timed, `cores` keeps a CPU core free for the timed process, and `environment`
says what the GPU was and whether it was fit to time on.
"""

AUDIENCE = "students"   # the public suite and `make bench` time kernels with it (grader/layout.py)
