pytest_plugins = ["harness.pytest_plugin"]
