"""The kernel: vocabularies, the clock, durations, id grammars and the schedule and queue
specs -- pure definitions every layer may import. They hold no model, read no database and
import nothing of weft_django above the kernel, so settings checks, models, the runtime and
the interfaces all validate and compare through one copy of each rule.
"""
