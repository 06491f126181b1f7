"""A display message whose content arrives already encoded as JSON.

`%phoenix history` of a long conversation displays megabytes of JSON made in a
child process (`whole_record`). `IPython.display` would take it as a dict, so
the kernel would decode the child's JSON and ipykernel encode it again, on the
event loop, ~0.1 s for 10,000 messages. jupyter_client's `Session` sends a
message whose content is bytes as it is (already packed, as in a relayed
message), so here the content goes to ipykernel's display publisher's session
and socket without being decoded.

Only where that is the whole of what `display` would do: ipykernel's own
publisher, with no transform hooks and no display history to keep. Anywhere
else (output captured by `%%capture`, a plain IPython shell, a hook) the caller
decodes the bundle and displays it as usual.
"""

from __future__ import annotations

from typing import Any

__all__ = ["display_encoded"]


def display_encoded(shell: Any, content: bytes) -> bool:
    """Send a `display_data` message with `content` (the JSON of {"data", "metadata",
    "transient"}) for the cell running now; False, having sent nothing, where the
    shell's display must go through `IPython.display`."""
    try:
        from ipykernel.zmqshell import ZMQDisplayPublisher
    except ImportError:
        return False
    publisher = getattr(shell, "display_pub", None)
    if (
        type(publisher) is not ZMQDisplayPublisher
        or publisher.session is None
        or publisher._hooks
        or publisher.store_display_history
    ):
        return False
    publisher._flush_streams()  # what the cell printed before stays before it
    message = publisher.session.msg("display_data", parent=publisher.parent_header)
    message["content"] = content  # bytes: sent as they are (`Session.serialize`)
    publisher.session.send(publisher.pub_socket, message, ident=publisher.topic)
    return True
