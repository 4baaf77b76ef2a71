"""The pure core: objects, quota tree, queues, flavor assignment, preemption.

Nothing under this package does I/O, awaits, reads a clock or uses global randomness: ``now`` is
always an argument, and every decision carries its reason.
"""
