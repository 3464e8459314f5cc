"""A user's whole session, in a real Jupyter kernel and in a real terminal IPython, checked after every cell.

``cells`` holds the cells, what each should do in the session's state and the sequences (scripted, and
drawn with a fixed seed); ``kernel`` and ``terminal`` drive the two front ends; ``checks`` holds the
invariants; ``play`` runs a sequence and fails with the whole session written out; ``inside`` is what
the harness runs inside the session (it only reads the user's namespace). Run one sequence with e.g.
``pytest tests/session -k progress``.
"""
