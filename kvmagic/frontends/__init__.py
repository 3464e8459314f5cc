"""The ways in: the ``%kvload``/``%%kvbench`` magics and the ``kvbench`` command, from one option table."""
