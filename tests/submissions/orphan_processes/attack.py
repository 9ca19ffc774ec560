# target: softmax
"""Fault: at import, start two long sleepers: one in the worker's session and one that escapes it
with setsid (what `nohup cmd &` in a new session does). None may outlive the grading run.
The token in their argv lets the test find them."""
import subprocess
import sys

_SLEEP = "import time; time.sleep(1000)"
subprocess.Popen([sys.executable, "-c", _SLEEP, "gallery-orphan-__TOKEN__-plain"],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen([sys.executable, "-c", _SLEEP, "gallery-orphan-__TOKEN__-setsid"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
