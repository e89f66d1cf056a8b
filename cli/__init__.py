"""The ``kickoff`` command line: click groups that parse, call a library function and print."""
