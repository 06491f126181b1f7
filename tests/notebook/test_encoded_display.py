"""A display message sent with content the child already encoded reaches the front end
as the message `IPython.display` would have sent (read back over a real ZMQ socket with
the kernel's own message signing), and nothing is sent where display must go through
IPython (a transform hook, output captured, a shell that is not ipykernel's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import zmq
from ipykernel.zmqshell import ZMQDisplayPublisher
from IPython.core.displaypub import CapturingDisplayPublisher
from jupyter_client.session import Session

from phoenix_nb.notebook.encoded_display import display_encoded

CONTENT = {
    "data": {"text/plain": "the whole record — “quoted”", "application/json": {"cycles": [1]}},
    "metadata": {},
    "transient": {},
}


@pytest.fixture
def wire() -> Iterator[tuple[Session, Any, Any]]:
    """(the kernel's session, its publishing socket, the front end's end of it)."""
    context = zmq.Context()
    kernel, front = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    kernel.bind("inproc://phoenix-display")
    front.connect("inproc://phoenix-display")
    try:
        yield Session(key=b"signing-key"), kernel, front
    finally:
        kernel.close(linger=0)
        front.close(linger=0)
        context.term()


def _publisher(session: Session, socket: Any) -> tuple[ZMQDisplayPublisher, dict[str, Any]]:
    publisher = ZMQDisplayPublisher(session=session, pub_socket=socket)
    parent = session.msg("execute_request", {"code": "%phoenix history"})
    publisher.set_parent(parent)
    return publisher, parent


def test_encoded_content_arrives_as_display_would_send_it(wire: tuple[Session, Any, Any]) -> None:
    session, socket, front = wire
    publisher, parent = _publisher(session, socket)
    encoded = json.dumps(CONTENT, ensure_ascii=False).encode()
    assert display_encoded(SimpleNamespace(display_pub=publisher), encoded)
    _, parts = session.feed_identities(front.recv_multipart())
    message = session.deserialize(parts)  # checks the signature
    assert message["msg_type"] == "display_data"
    assert message["content"] == CONTENT
    assert message["parent_header"]["msg_id"] == parent["header"]["msg_id"]
    # the same as IPython's own path
    publisher.publish(CONTENT["data"], CONTENT["metadata"])
    _, parts = session.feed_identities(front.recv_multipart())
    assert session.deserialize(parts)["content"] == message["content"]


def test_nothing_is_sent_where_display_must_go_through_ipython(
    wire: tuple[Session, Any, Any],
) -> None:
    session, socket, front = wire
    encoded = json.dumps(CONTENT).encode()
    hooked, _ = _publisher(session, socket)
    hooked.register_hook(lambda message: message)
    for display_pub in (hooked, CapturingDisplayPublisher(), None):
        assert not display_encoded(SimpleNamespace(display_pub=display_pub), encoded)
    assert not display_encoded(object(), encoded)
    assert front.poll(0) == 0, "a message was sent"
