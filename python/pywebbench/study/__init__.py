"""The study layer: what a study is, declared before anything runs.

Its modules read a study's configuration (``config``, ``tables``, ``declare``, ``flag_texts``,
``profiles``, ``slo``), turn it into ``pywebbench run``'s flags (``options``) and plan its
matrix of cells (``matrix``). They sit below ``run``, ``report`` and ``ab``, which import
them; nothing here starts a process or loads a server.
"""
