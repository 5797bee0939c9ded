"""Per-type business metrics: run ends and activity attempts, labelled by registered type
name. They sit apart from the claim protocol's own counters (``ownership.metrics``, which
carries them) because their label values are code, not a closed tuple, and must stay
bounded; nothing here imports a model or the runtime.
"""
