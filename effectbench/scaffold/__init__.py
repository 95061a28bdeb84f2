"""Package templates for plugin authors: ``effectbench new provider NAME`` (see generate.py).

Kept empty so that registering the command (command.py) imports only click.
"""
