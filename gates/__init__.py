"""The four-gate verification cascade (docs/method.md#gates): "the checker is the product".

Entry points: ``gates.cascade.verify_candidate`` (``kernelopt verify``),
``gates.campaign.gate_candidate`` / ``gate_model`` (the Temporal activities).
Design, threat model and limits: ``gates/README.md``.  Importing this package
imports nothing heavy.
"""
