"""The model: what a topology is made of, and nothing that runs it.

Topologies and their builder, the component base classes users subclass (spouts, bolts,
batch bolts, combiners), tuples and fields, grouping declarations, configuration, the task
context, errors, user metrics, fault records, offset bookkeeping, and how public objects
name their package. Plain data and rules: these modules import only one another and the
standard library, never the machinery, not even for type hints, so a topology can be built,
checked, pickled and shipped without loading any of it.
"""
