"""What the test suite and the benchmarks share: test hosts on network namespaces, the TCP fault
proxy, private Redis and pgbouncer instances, free ports, background loops, and the chaos
harness (its fault schedule, nemesis, recorder and checker: ``harness.chaos``).

Neither ``tests/`` nor ``bench/`` imports the other; both import this. Not part of the product
(not installed; ``tests/project.py`` leaves it out of the product's checks).
"""
