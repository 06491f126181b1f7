"""Makes the `fake_anthropic` fixture available here.

`pytest_plugins` is only allowed in the top-level conftest (tests/conftest.py,
owned by the lead); until it registers `phoenix_nb.testing.pytest_plugin`
there, the fixture is imported directly.
"""

from phoenix_nb.testing.pytest_plugin import fake_anthropic

__all__ = ["fake_anthropic"]
