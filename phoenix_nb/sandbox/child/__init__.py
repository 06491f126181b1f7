"""The launcher process and the mechanisms it loads by file path.

Standard library only, plus ``pyseccomp`` and ``landlockpy`` (imported inside
the functions that apply seccomp and Landlock): ``launcher.py`` runs as a
script (``python -I``) and loads ``confine``, ``cgroup`` and ``cleanup`` by
file path, so nothing here may import phoenix_nb or any other package. An
import-linter contract in ``pyproject.toml`` holds this.
"""

__all__: list[str] = []
