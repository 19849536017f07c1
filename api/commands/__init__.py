"""The subcommands of the ``halfway`` command line, one module each (``halfway.cli`` lists them)."""
