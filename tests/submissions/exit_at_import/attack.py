# target: softmax
"""Fault: os._exit(0) when softmax.py is imported, so the worker vanishes with a 'success' code
before any softmax call can answer. Every softmax check is lost; matmul is untouched."""
import os

os._exit(0)
