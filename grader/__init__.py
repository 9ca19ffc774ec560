"""The GPU-systems assignment harness: test plumbing, grader, reports and handout builder.

Importing this package is cheap: nothing here pulls in torch or Triton.
"""

__version__ = "0.1.0"
