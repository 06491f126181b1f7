"""The `fake_anthropic` fixture is registered for all tests in tests/conftest.py."""
