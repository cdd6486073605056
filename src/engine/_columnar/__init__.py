"""The columnar road: ``TupleBatch`` (tuples as columns), the batch collector, and Storm's XOR
acking rules applied to whole batches (the per-tuple collectors follow the same rules).

Imports the model, ``_monitor`` (latency records) and ``acker_kernel``; never the executors
or the runtime.
"""
