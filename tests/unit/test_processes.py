"""`memstream.processes`' ports: one a listener holds is taken, and free once it closes."""

from __future__ import annotations

import socket

from memstream.processes import port_free


def test_a_port_is_taken_while_a_listener_holds_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_free(port)
    assert port_free(port)
