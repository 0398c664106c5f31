# The `leasehold` fixture (an in-process scheduler over moto) and `clock` (its time).
pytest_plugins = ["leasehold.testing.fixtures"]
