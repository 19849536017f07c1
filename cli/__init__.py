"""The ``halfway`` command line: an application on the library (``halfway.api`` and below);
nothing in the library imports it."""
