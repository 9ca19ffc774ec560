"""Reports over graded submissions: the result model, HTML pages, and the CSV and Gradescope files."""

AUDIENCE = "staff"   # renders finished results; never shipped, never graded with (grader/layout.py)
