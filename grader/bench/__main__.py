"""`python -m grader.bench`: the student bench (`make bench`); staff use `grader bench`."""

import sys

from grader.bench.student import main

sys.exit(main())
