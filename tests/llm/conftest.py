pytest_plugins = ["phoenix_nb.testing.pytest_plugin"]
