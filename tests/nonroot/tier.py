"""Run part of the suite as an ordinary Unix user: the tier .ci/run adds (issue 34).

Nearly every notebook runs as an ordinary user; the suite otherwise runs as
root. Run as root, this:

1. makes the user (``phxuser`` unless ``--user``) if it does not exist;
2. gives it a virtual environment it can run: the default ``python3`` here lives
   under root's 0700 home, so the venv is made from ``/usr/bin/python3`` (the same
   minor version) and sees the caller's own environment's packages through one
   ``.pth`` (``site.addsitedir``), so nothing is installed twice: the user runs
   exactly the install the root tier tested;
3. with ``--cgroup``, delegates a cgroup to it the way an admin (or systemd's
   ``Delegate=yes``, or a spawner) does: a group under the caller's own group in
   each hierarchy (v1: ``memory`` and ``pids``; v2: the unified one), owned by the
   user (the directory, ``cgroup.procs`` and, on v2, ``cgroup.subtree_control`` and
   ``cgroup.threads``), and starts the user's pytest inside it; removed afterwards;
4. lets the user reach this checkout: a fresh clone may sit under a folder only
   root can enter (``mktemp -d`` makes 0700 folders, as ``ci-under-load`` does), so
   every folder above the checkout that the user cannot search gets search
   permission for others (``o+x``: enter, not list), said in one line each;
5. runs ``python -m pytest -p no:cacheprovider <args>`` as the user (``runuser``)
   from this checkout (its files are readable, as git checks them out), in a
   temporary folder of its own, with ``PHOENIX_TEST_TIER`` = ``user`` or ``user-cgroup`` telling the
   tests what this tier must show.

Usage: ``python -m tests.nonroot.tier [--cgroup] [--user NAME] -- <pytest args>``.
Exits with pytest's status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

__all__ = ["delegate_cgroup", "ensure_user", "let_reach", "main", "remove_cgroup", "user_venv"]

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
TIER_ENV = "PHOENIX_TEST_TIER"


def ensure_user(name: str) -> pwd.struct_passwd:
    """The user, made (with a home) if missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        # Two tiers may start side by side: the other one may have made it meanwhile.
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        subprocess.run([useradd, "-m", "-s", "/bin/bash", name], check=False)
        return pwd.getpwnam(name)


def _can_search(folder: Path, user: pwd.struct_passwd) -> bool:
    """Whether `user` may enter `folder`, by its mode bits (no ACLs here)."""
    info = folder.stat()
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & 0o100)
    if info.st_gid in os.getgrouplist(user.pw_name, user.pw_gid):
        return bool(info.st_mode & 0o010)
    return bool(info.st_mode & 0o001)


def let_reach(path: Path, user: pwd.struct_passwd) -> list[Path]:
    """Give others search permission on every folder above `path` (and `path`) that
    `user` cannot enter; returns those folders. Search only: nothing becomes listable."""
    changed = []
    for folder in [*reversed(path.resolve().parents), path.resolve()]:
        if not _can_search(folder, user):
            folder.chmod(folder.stat().st_mode | 0o001)
            changed.append(folder)
            print(f"tier: {user.pw_name} may now enter {folder} (o+x)", flush=True)
    return changed


def user_venv(path: Path) -> Path:
    """A venv any user can run, seeing this interpreter's packages; its python.

    Made once (kept between runs: it is only a few files). The ``.pth`` names
    this environment's site-packages, so the user imports exactly what the
    caller installed (a wheel under .ci/run, an editable install locally).
    """
    python = path / "bin" / "python"
    site = sysconfig.get_paths()["purelib"]
    pth = path / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    pth = pth / "site-packages" / "phoenix_tier_caller.pth"
    line = f"import site; site.addsitedir({site!r})\n"
    if not python.exists() or not pth.exists() or pth.read_text() != line:
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(path)], check=True)
        pth.write_text(line)
        _copy_scripts(Path(sysconfig.get_paths()["scripts"]), python)
    os.chmod(path, 0o755)
    return python


def _copy_scripts(scripts: Path, python: Path) -> None:
    """The caller's console scripts (``jupyter-nbconvert``…), run by the user's python,
    and its binaries (ripgrep's ``rg``), which tools look up beside the interpreter."""
    for script in scripts.iterdir():
        target = python.parent / script.name
        skip = script.name.startswith(("python", "activate", "pip", "Activate"))
        if skip or not script.is_file() or target.exists():
            continue
        head = script.read_bytes()[:256]
        if head.startswith(b"\x7fELF"):
            target.symlink_to(script)
        elif head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]:
            body = script.read_text().split("\n", 1)[1]
            target.write_text(f"#!{python}\n{body}")
            target.chmod(0o755)


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for v2's unified hierarchy)."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def _mount_points() -> dict[str, str]:
    """Mount point per v1 controller ("memory", "pids") and "" for cgroup2."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, post_fields = pre.split(), post.split()
        if not post_fields:
            continue
        if post_fields[0] == "cgroup2":
            out.setdefault("", fields[4])
        elif post_fields[0] == "cgroup":
            for ctl in post_fields[-1].split(","):
                if ctl in ("memory", "pids"):
                    out[ctl] = fields[4]
    return out


def delegate_cgroup(user: pwd.struct_passwd, name: str) -> list[Path]:
    """Groups delegated to ``user`` under our own (v1 memory + pids, else v2); made here.

    Returns their directories (write "0" to each ``cgroup.procs`` to enter them).
    """
    own, mounts = _own_cgroups(), _mount_points()
    if "memory" in mounts and "pids" in mounts:
        dirs = [Path(mounts[c]) / own.get(c, "/").lstrip("/") / name for c in ("memory", "pids")]
        files = ("cgroup.procs", "tasks")
    elif "" in mounts:
        base = Path(mounts[""]) / own.get("", "/").lstrip("/")
        (base / "cgroup.subtree_control").write_text("+memory +pids")
        dirs = [base / name]
        files = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
    else:
        raise SystemExit("tier: no cgroup filesystem to delegate")
    for d in dirs:
        d.mkdir(exist_ok=True)
        os.chown(d, user.pw_uid, user.pw_gid)
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(d / f, user.pw_uid, user.pw_gid)
    return dirs


def remove_cgroup(dirs: list[Path]) -> None:
    """Remove the delegated groups and whatever the user made in them (deepest first)."""
    for top in dirs:
        if not top.exists():
            continue
        # os.walk, not rglob: a group the kernel or phoenix removes while we walk is
        # skipped (os.walk ignores a directory that vanished), never an error.
        subdirs = [
            Path(root) / name for root, names, _ in os.walk(top, topdown=False) for name in names
        ]
        for d in [*subdirs, top]:
            for _ in range(50):  # a group empties once its last member is reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", default="phxuser")
    parser.add_argument("--cgroup", action="store_true", help="delegate a cgroup to the user")
    parser.add_argument("--venv", default=str(REPO / ".ci" / "user-venv"))
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("tier: run as root (it makes the user and delegates its cgroup)")
    user = ensure_user(args.user)
    let_reach(REPO, user)
    python = user_venv(Path(args.venv).resolve())
    tier = "user-cgroup" if args.cgroup else "user"
    env = {
        "HOME": user.pw_dir,
        "USER": user.pw_name,
        "LOGNAME": user.pw_name,
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        TIER_ENV: tier,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for name in ("CI", "PHOENIX_SEED"):
        if name in os.environ:
            env[name] = os.environ[name]
    groups = delegate_cgroup(user, f"phoenix-tier-{os.getpid()}") if args.cgroup else []
    procs = [str(d / "cgroup.procs") for d in groups]

    def enter() -> None:  # in the child, still root: join the delegated groups, then runuser
        for path in procs:
            with open(path, "w") as fh:
                fh.write("0")

    command = [
        shutil.which("runuser") or "/usr/sbin/runuser",
        "-u",
        user.pw_name,
        "--",
        str(python),
        "-m",
        "pytest",
    ]
    # Its own temporary folder: two tiers may run side by side as the same user, and
    # pytest prunes the numbered folders of /tmp/pytest-of-<user> it finds.
    # Not named after the tier: PHOENIX_TEST_TIER's value is an environment value
    # commands do not get, so run_python's fork stars it wherever it occurs, paths too.
    basetemp = Path(f"/tmp/phoenix-tier-{os.getpid()}")
    command += ["-p", "no:cacheprovider", f"--basetemp={basetemp}", *args.pytest_args]
    started = time.monotonic()
    print(f"tier {tier}: {' '.join(command)}", flush=True)
    try:
        code = subprocess.call(command, cwd=REPO, env=env, preexec_fn=enter if procs else None)
    finally:
        remove_cgroup(groups)
        shutil.rmtree(basetemp, ignore_errors=True)
    print(f"tier {tier}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
