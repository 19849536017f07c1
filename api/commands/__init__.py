"""The subcommands of the ``halfway`` command line, in the order ``halfway --help`` lists them."""

from halfway.commands.base import Command
from halfway.commands.inspect import COMMAND as INSPECT

__all__ = ["COMMANDS", "Command"]

COMMANDS: tuple[Command, ...] = (INSPECT,)
