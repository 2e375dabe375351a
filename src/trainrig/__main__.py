"""`python -m trainrig` runs the CLI."""

from trainrig.cli.main import main

if __name__ == "__main__":
    main()
