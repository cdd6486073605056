"""Project-wide pytest configuration: Squall's own pytest plugin (the simulation fixture),
and one Hypothesis profile: no per-example deadline, since a shared 2-core CI machine
stalls any example now and then (each test still has pytest-timeout's bound)."""

from hypothesis import settings

pytest_plugins = ["engine.testing.pytest_plugin"]

settings.register_profile("squall", deadline=None)
settings.load_profile("squall")
