"""What a workflow body is written with: ``@workflow`` / ``@activity`` and their registry,
``ctx`` and the commands it yields, payload rules, patches, sagas and publishing -- and what
a definition refuses at import. The engine's lowest wing: it imports no other wing and no
model, so decorating a function never touches the database or the runtime.
"""
