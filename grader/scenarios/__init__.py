"""Worker-side scenarios of the hidden suite, one module per problem.

`impl.run(fn, ...)` sends `fn` to the worker by reference, and runs only the grader's scenario modules'
functions (grader.worker.entry_points): a scenario defined in a hidden test module would make the worker
import that module, so the hidden tests would have to stay readable to student code; a graded run
empties its copy of tests_hidden/ after collection instead (`grader.disposable`). A new module here
must be added to `grader.worker.entry_points.MODULES`.

Scenarios only build what they need from their arguments, run the student's code and return plain
values: the inputs and the assertions stay in the hidden tests. The worker can read this package, so
nothing here is secret; the handout does not ship it (its AUDIENCE, grader/layout.py), since it shows
what the hidden suite exercises.
"""

AUDIENCE = "checker"   # hidden-suite scenarios the worker imports; never shipped (grader/layout.py)
