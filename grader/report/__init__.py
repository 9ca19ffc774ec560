"""Reports over graded submissions: the result model, HTML pages, and the CSV and Gradescope files."""
