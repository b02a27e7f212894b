"""What binds data to noise: mechanisms, the exact per-example ledger, the budget accountant, the
CSPRNG noise sources and the private tail histogram.  Nothing here imports the optimisation layers
(``erm/``, ``extension/``) or the runners (``run/``)."""
