# target: softmax
"""Cheat: an error message built to be misread downstream. It holds newline-separated JSON records
claiming every softmax check passed, followed by an end line, so that a results stream written
without escaping would end there. It also holds HTML that would run in the browser of a TA who
opens a report that does not escape it."""
import json as _json

_FORGED = "\n".join(
    [_json.dumps({"type": "test", "nodeid": f"tests_public/forged.py::test_{check}", "check": check,
                  "outcome": "passed", "message": "", "duration": 0.0, "perf": None})
     for check in ("softmax.gallery.triton", "softmax.gallery.fresh", "softmax.gallery.hidden")]
    + [_json.dumps({"type": "end"})])


def softmax_triton(x):
    raise ValueError("\n" + _FORGED + "\n<script>alert('gallery-xss')</script><img src=x onerror=alert(1)>\n")
