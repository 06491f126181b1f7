"""Why a host gives Restricted commands fewer namespaces, in words an admin can act on:
the kernel's refusal (with the errno the probe saw) apart from PHOENIX_SANDBOX_NAMESPACES=off.
"""

from __future__ import annotations

import errno
import subprocess
import sys

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


PROBE_UNDER_A_PROFILE = """
import errno, pyseccomp
from phoenix_nb.sandbox.child import confine
f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
f.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")  # a container profile's refusal
f.load()
print(confine.probe_namespaces().why_not)
"""


def test_the_probe_reports_a_kernel_refusal_with_its_errno() -> None:
    """A real refusal: a seccomp filter like a container's default profile makes the
    kernel refuse unshare(2) in a fresh interpreter; the probe's words carry the errno."""
    said = subprocess.run(
        [sys.executable, "-c", PROBE_UNDER_A_PROFILE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert said.startswith(
        "no user namespaces: unshare(CLONE_NEWUSER) refused with EPERM (Operation not permitted)"
    ), said
    assert "container profile" in said and "PHOENIX_SANDBOX_NAMESPACES" not in said
