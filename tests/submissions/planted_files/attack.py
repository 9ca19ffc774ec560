# target: softmax
"""Cheat: softmax is unfinished, and files planted beside it try to turn its failures into passes: a
conftest.py and a pytest plugin rewriting every report to 'passed', a pytest.ini loading that plugin,
sitecustomize.py and a .pth file, a fake grader package, a fake hidden test, and ready-made results
files claiming full marks. Intake copies only the module files and importable helper modules beside
them (gallery_plugin.py is one, staged where only the student's own code could import it), so none of
it has any effect."""


def softmax_triton(x):
    raise NotImplementedError("softmax_triton: not implemented yet")


def online_softmax(x, block_size):
    raise NotImplementedError("online_softmax: not implemented yet")
