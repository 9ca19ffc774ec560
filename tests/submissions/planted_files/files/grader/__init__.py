"""A fake grader package: would replace the real plugin if it were importable."""
