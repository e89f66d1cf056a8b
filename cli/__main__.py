"""Allow ``python -m cli`` as well as the ``kickoff`` console script."""

from cli.main import main

main()
