"""`memstream.processes`' ports: a free one is free, and one a listener holds is not."""

from __future__ import annotations

import socket

from memstream.processes import free_port, port_free


def test_a_port_is_free_until_a_listener_holds_it() -> None:
    port = free_port()
    assert port_free(port)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert not port_free(port)
