"""Lets `python -m redrive` run the command line."""

from redrive.cli import main

main()
