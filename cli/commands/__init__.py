"""The subcommands of the ``halfway`` command line, one module each (``halfway.cli.main`` lists them)."""
