# modules: matmul
"""Fault: softmax.py was never submitted. Its checks are 'not implemented'; matmul is graded."""
