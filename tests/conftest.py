"""Fixtures shared by every test directory.

`pytest_plugins` may only be declared here (pytest refuses it in nested
conftest files): the fake Messages API fixture comes from our own package.
"""

pytest_plugins = ["phoenix_nb.testing.pytest_plugin"]
