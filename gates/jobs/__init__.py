"""Child-process jobs: ``reference`` (eager outputs), ``candidate`` (gates 1-2 runs), ``timing``,
and ``screen`` (the search's untrusted first tier: a round's estimates in one process).

Each module exposes ``JOB_TYPE`` (its pydantic job model) and ``run(job)``;
``gates.child`` dispatches to them inside a fresh process.
"""
