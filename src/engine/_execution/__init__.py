"""What runs inside executors: spout and bolt executors, collectors, receive queues, gates,
control records, the acker, groupers, and the ``Services`` record.

Executors reach the running topology only through ``Services``: nothing here imports the
runtime, not even for type hints. Imports the model, ``_time``, ``_monitor`` and
``_columnar``.
"""
