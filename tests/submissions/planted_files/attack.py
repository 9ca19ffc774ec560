# target: softmax
"""Cheat: softmax is unfinished, and files planted beside it try to turn its failures into passes: a
conftest.py and a pytest plugin rewriting every report to 'passed', a pytest.ini loading that plugin,
sitecustomize.py and a .pth file, a fake grader package, a fake hidden test, and ready-made results
files claiming full marks. Intake copies module files only, so none of it is ever seen."""


def softmax_triton(x):
    raise NotImplementedError("softmax_triton: not implemented yet")


def online_softmax(x, block_size):
    raise NotImplementedError("online_softmax: not implemented yet")
