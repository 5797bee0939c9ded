"""Reading runs: ``RunFilter`` (what a listing or a bulk operation means), listing and
counting, what a run waits for, and the per-type metrics recorded when a run or an attempt
ends. The client, the API, the CLI and the admin read a filter through one ``RunFilter``,
and waits are derived with the runtime's own rules; nothing here drives a run.
"""
