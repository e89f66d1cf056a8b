"""The benchmarks (scripts: ``.venv/bin/python bench/NAME.py``) and their own tests (``bench/tests``)."""
