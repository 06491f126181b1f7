"""A notice carries its own kind's payload: a mismatch fails where the notice is made."""

from __future__ import annotations

import pytest

from phoenix_nb.core.effects import Notify
from phoenix_nb.core.notices import (
    PAYLOAD_OF,
    ModeChanged,
    Notice,
    RetryScheduled,
    UpgradeRequested,
)


def test_every_notice_kind_names_its_payload() -> None:
    assert set(PAYLOAD_OF) == set(Notice)


def test_a_notice_with_another_kinds_payload_or_none_is_refused() -> None:
    assert Notify(Notice.MODE_CHANGED, ModeChanged("restricted")).data == ModeChanged("restricted")
    assert Notify(Notice.CANCELLED).data is None
    with pytest.raises(TypeError):
        Notify(Notice.RETRY, ModeChanged("restricted"))
    with pytest.raises(TypeError):
        Notify(Notice.UPGRADE_REQUESTED)
    with pytest.raises(TypeError):
        Notify(Notice.ERROR, UpgradeRequested("r", "t"))
    with pytest.raises(TypeError):
        Notify(Notice.RETRY, {"attempt": 2})  # type: ignore[arg-type]
    assert Notify(Notice.RETRY, RetryScheduled(2, 3, 1.0, "server", "boom")).kind == "retry"
