"""Running a scenario: every check of its inputs (``inputs``, ``sizing``), the engine's world
built from them (``world``), the sliced run (``driver``), and what stops one early: broken
invariants (``invariants``) and deadlocks (``diagnose``)."""
