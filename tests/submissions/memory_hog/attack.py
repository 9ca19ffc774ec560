# target: softmax
"""Fault: softmax_triton asks for four times the machine's RAM in one allocation. The kernel refuses
it (MemoryError) under the default overcommit policy; where overcommit is unlimited the attack does
not risk the machine and raises MemoryError itself."""
import os


def softmax_triton(x):
    with open("/proc/sys/vm/overcommit_memory") as policy:
        unlimited = policy.read().strip() == "1"
    if unlimited:
        raise MemoryError("gallery: overcommit unlimited here; not allocating")
    return bytearray(4 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
