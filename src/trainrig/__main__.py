"""`python -m trainrig` runs the CLI."""

from trainrig.cli.main import main

main()
