"""What operators see of a running topology: statistics records, the error log, and the
access rules of the engine's HTTP servers (web UI, DRPC endpoint).

The hot path bumps plain counters; these records are built from them on demand. Imports
only ``_time`` (the error log's throttle runs on the topology's clock).
"""
