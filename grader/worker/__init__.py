"""The worker side: the process that imports and runs the student's code, and the channel to it.

`process` is the worker itself; `channel` its named messages and their one reader; `shared_tensors`
the memory tensors cross in; `guarded_call` a call under the forbidden-op guards; `compile_notices`
what the worker says while Triton compiles; `modules` where the student's modules are found; and
`import_path` the checker's import path sealed against files the worker can write.
"""

AUDIENCE = "students"   # the public suite runs student code in it (`--isolate`) (grader/layout.py)
