"""Why a host gives Restricted commands fewer namespaces, in words an admin can act on:
the kernel's refusal (with the errno the probe saw) apart from PHOENIX_SANDBOX_NAMESPACES=off.
"""

from __future__ import annotations

import errno

from phoenix_nb.sandbox import Hello, namespaces_words
from phoenix_nb.sandbox.child.confine import NAMESPACES_OFF, namespace_refusal


def test_a_refused_user_namespace_names_the_call_the_errno_and_where_it_comes_from() -> None:
    said = namespace_refusal(True, "unshare", errno.EPERM)
    assert said.startswith("unshare(CLONE_NEWUSER) refused with EPERM (Operation not permitted)")
    assert "container profile" in said and "kernel setting" in said
    assert "user.max_user_namespaces" in namespace_refusal(True, "unshare", errno.ENOSPC)
    root = namespace_refusal(False, "unshare", errno.EPERM)
    assert "without a user namespace" in root and "CAP_SYS_ADMIN" in root
    assert "EACCES" in namespace_refusal(True, "setup", errno.EACCES)


def test_status_words_tell_a_refusal_from_a_choice() -> None:
    refused = "no user namespaces: " + namespace_refusal(True, "unshare", errno.EPERM)
    pod = Hello(namespaces=False, userns=False, landlock_abi=6, namespaces_why_not=refused)
    assert namespaces_words(pod) == refused
    assert "EPERM" in refused and "PHOENIX_SANDBOX_NAMESPACES" not in refused
    chosen = Hello(
        namespaces=False, userns=False, landlock_abi=6, namespaces_why_not=NAMESPACES_OFF
    )
    assert "PHOENIX_SANDBOX_NAMESPACES=off" in namespaces_words(chosen)
    assert "refused" not in namespaces_words(chosen)
    full = Hello(namespaces=True, userns=True, landlock_abi=6)
    assert namespaces_words(full) == "user, network, IPC, mount and PID namespaces"
