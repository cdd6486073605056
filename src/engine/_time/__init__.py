"""Time and event loops: the one clock every timer reads, uvloop, and virtual time.

Everything that waits reads ``Clock``; under ``VirtualTimeLoop`` the same code runs in
simulated time. Imports nothing else of the engine.
"""
