"""Project-wide pytest configuration: Squall's own pytest plugin (the simulation fixture)."""

pytest_plugins = ["engine.testing.pytest_plugin"]
