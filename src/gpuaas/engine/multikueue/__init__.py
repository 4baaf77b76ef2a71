"""MultiKueue in the server: Kueue's admission check controller that dispatches a manager's
workloads to worker clusters (``controller``), how a worker is reached (``remote``), the writes
on the manager (``writes``) and the job webhook's part (``webhook``). The decisions themselves
are pure and live in ``core.multikueue``."""
