# target: softmax
"""Fault: at import, write files straight into /tmp and /dev/shm (absolute paths,
not TMPDIR). Whether or not bubblewrap holds the run, none of them may be left on the host."""
for _folder in ("/tmp", "/dev/shm"):
    try:
        with open(f"{_folder}/gallery-escape-__TOKEN__-tmpfile", "w") as _handle:
            _handle.write("left behind by a graded submission")
    except OSError:
        pass
