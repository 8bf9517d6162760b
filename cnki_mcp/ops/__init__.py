"""Operations: background work with budgets, stages, progress, checkpoints, long-poll waits, the person's
pauses, cancel, resume and continue, and ``interrupted`` after a crash (``jobs``).

May import: pages, store, core (the site, above, is handed ``OperationContext``).
"""
