"""How a body is replayed against its journal: the replay machine, the tree of one yield
(``branches``), the sandbox a body runs in, the errors codec, update handlers run inside a
replay, the live-replay cache, and the deploy gate that replays live runs against new code.
All of it must give the same answer live and on replay, from the journal alone; of the
engine's wings it imports only ``workflow``.
"""
